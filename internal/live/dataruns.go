package live

import (
	"github.com/arenactl/arenactl/internal/procfs"
)

// DataRuns splits [start, end) into runs of pages that hold data (present
// or swapped) and pages that do not (never touched, or given back), from
// the process's pagemap. The walker copies whole heaps only where they hold
// data: reading a page that holds none would map the zero page into the
// target, and its walk of the free lists leaves the pages malloc_trim gave
// back as they are.
func (t *Target) DataRuns(start, end uint64, fn func(start, end uint64, data bool)) error {
	return dataRuns(t.Proc(), start, end, fn)
}

func dataRuns(p *procfs.Proc, start, end uint64, fn func(start, end uint64, data bool)) error {
	pm, err := p.OpenPagemap()
	if err != nil {
		return err
	}
	defer pm.Close()
	return pm.Runs(start, end, fn)
}

// ReadsInParallel says that ReadAt may be called from two goroutines at
// once: process_vm_readv and /proc/PID/mem keep no state between reads. The
// walker then copies the next arena's heaps while it walks one.
func (t *Target) ReadsInParallel() {}

// ReadsInParallel is Target.ReadsInParallel for the image, whose mem file
// keeps no state between reads either.
func (im *Image) ReadsInParallel() {}

// DataRuns is Target.DataRuns over the image's own pagemap, which shows
// the process's pages as they were when the image was made.
func (im *Image) DataRuns(start, end uint64, fn func(start, end uint64, data bool)) error {
	return dataRuns(im.proc, start, end, fn)
}
