package walk

import (
	"fmt"
	"strings"
	"testing"
)

// maps --json of a process with a grown thread arena: the per-class totals
// are the sums of the mappings --all lists, the arena's heap is among them,
// and without --all there is no mappings field at all.
func TestMapsJSON(t *testing.T) {
	tg := startGrow(t)
	mustGrow(t, tg, "grow 16")
	pid := fmt.Sprint(tg.Pid)
	var all jsonMapsReport
	if err := decodeDoc([]byte(mustRun(t, "maps", "--json", "--all", pid).Stdout), &all); err != nil {
		t.Fatal(err)
	}
	if all.Pid != tg.Pid || len(all.Classes) == 0 || len(all.Mappings) == 0 || all.Process.Rss == 0 {
		t.Fatalf("pid %d, %d classes, %d mappings, RSS %d", all.Pid, len(all.Classes), len(all.Mappings), all.Process.Rss)
	}
	type sums struct {
		count            int
		size, rss, dirty uint64
	}
	byClass := map[string]*sums{}
	for _, m := range all.Mappings {
		if m.Start >= m.End || m.Class == "" || len(m.Perms) != 4 {
			t.Errorf("mapping %+v", m)
		}
		s := byClass[m.Class]
		if s == nil {
			s = &sums{}
			byClass[m.Class] = s
		}
		s.count++
		s.size += m.End - m.Start
		s.rss += m.Rss
		s.dirty += m.PrivateDirty
	}
	var rss uint64
	for _, c := range all.Classes {
		s := byClass[c.Class]
		if s == nil || s.count != c.Count || s.size != c.Size || s.rss != c.Rss || s.dirty != c.PrivateDirty {
			t.Errorf("class %s: %+v, its mappings add up to %+v", c.Class, c, s)
		}
		rss += c.Rss
	}
	if heap := byClass["arena-heap"]; heap == nil || heap.rss < 16<<20*95/100 {
		t.Errorf("the arena's heap: %+v, want 16 MiB resident", heap)
	}
	if rss == 0 || rss > all.Process.Rss*11/10 {
		t.Errorf("classes hold %d bytes of RSS, the process %d", rss, all.Process.Rss)
	}
	summary := mustRun(t, "maps", "--json", pid).Stdout
	var only jsonMapsReport
	if err := decodeDoc([]byte(summary), &only); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(summary, `"mappings"`) || only.Pid != tg.Pid || len(only.Classes) == 0 {
		t.Errorf("maps --json without --all:\n%s", summary)
	}
	mustQuit(t, tg)
}
