package record

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/arenactl/arenactl/internal/report"
)

// ParseTiers reads record's --tiers: "100ms:3s,1s:10s,5s*20" is 100 ms intervals
// for the last 3 s, 1 s ones for the last 10 s, then 5 s ones, at most 20
// (the step doubling beyond). "" is the default tiers.
func ParseTiers(s string) ([]report.RecordingTier, error) {
	if s == "" {
		return nil, nil
	}
	var out []report.RecordingTier
	parts := strings.Split(s, ",")
	for i, p := range parts {
		var t report.RecordingTier
		var err error
		if i == len(parts)-1 {
			step, n, ok := strings.Cut(p, "*")
			if !ok {
				return nil, errors.New("the last tier is STEP*MAX")
			}
			if t.Step, err = time.ParseDuration(step); err == nil {
				t.MaxIntervals, err = strconv.Atoi(n)
			}
		} else {
			step, span, ok := strings.Cut(p, ":")
			if !ok {
				return nil, errors.New("a tier before the last is STEP:SPAN")
			}
			if t.Step, err = time.ParseDuration(step); err == nil {
				t.Span, err = time.ParseDuration(span)
			}
			if err == nil && (t.Span <= 0 || len(out) > 0 && t.Span <= out[len(out)-1].Span) {
				err = errors.New("the spans must grow")
			}
		}
		if err == nil && (t.Step <= 0 || t.MaxIntervals < 0 || t.MaxIntervals > 100000 || len(parts) > 8) {
			err = errors.New("out of range")
		}
		if err != nil {
			return nil, fmt.Errorf("%q: %v", p, err)
		}
		out = append(out, t)
	}
	return out, nil
}
