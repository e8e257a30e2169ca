package stackprof_test

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/schema"
	"github.com/arenactl/arenactl/internal/stackprof"
	"github.com/arenactl/arenactl/internal/testutil"
	"github.com/arenactl/arenactl/internal/unwind"
)

// expectTail checks that the site's frames end (towards the leaf) with
// want, in order.
func expectTail(t *testing.T, s *stackprof.Site, want []string) {
	t.Helper()
	names := siteNames(s)
	if len(names) < len(want) || strings.Join(names[len(names)-len(want):], " > ") != strings.Join(want, " > ") {
		t.Fatalf("stack is %s,\nwant it to end with %s", strings.Join(names, " > "), strings.Join(want, " > "))
	}
}

// TestBuildSites builds the profile of samples taken at the allocator's
// entry in a C++ program built -O2 -fomit-frame-pointer: each site's chain
// unwound in order from the thread's start to the allocator, demangled,
// with the allocating frame's file:line, its module's build-id, and the
// unbiased estimates of its samples.
func TestBuildSites(t *testing.T) {
	st := startSites(t)
	p := stackprof.Build(fixtureRaws(st), fixtureWindow, st.u, st.s)
	if len(p.Sites) != 2 || p.Samples != 5 || p.Incomplete != 0 || p.Truncated != 0 {
		t.Fatalf("%d sites of %d samples (%d incomplete, %d truncated), want 2 of 5, all complete",
			len(p.Sites), p.Samples, p.Incomplete, p.Truncated)
	}
	var widget, buffer *stackprof.Site
	for i := range p.Sites {
		switch p.Sites[i].Leaf().Function {
		case "make_widget":
			widget = &p.Sites[i]
		case "reserve":
			buffer = &p.Sites[i]
		}
	}
	if widget == nil || buffer == nil {
		t.Fatalf("sites are %v and %v", siteNames(&p.Sites[0]), siteNames(&p.Sites[1]))
	}
	t.Logf("widget: %s\nbuffer: %s", strings.Join(siteNames(widget), " > "), strings.Join(siteNames(buffer), " > "))
	expectTail(t, widget, []string{"widget_main", "server::handle", "cache<int>::fill", "make_widget", "operator new"})
	expectTail(t, buffer, []string{"buffer_main", "parser::parse", "grow_buffer", "reserve", "realloc"})
	// reserve is inlined into grow_buffer: a frame of its own at the same
	// address, grow_buffer's line the one of the inlined call.
	n := len(buffer.Frames)
	if in, out := buffer.Frames[n-2], buffer.Frames[n-3]; !in.Inlined || out.Inlined || in.Addr != out.Addr ||
		filepath.Base(out.File) != "sites.cpp" || out.Line != sourceLine(t, "// site:reserve") || out.Mangled != "grow_buffer" {
		t.Errorf("reserve %+v\ninlined into grow_buffer %+v, want the same address, grow_buffer at sites.cpp:%d", in, out, sourceLine(t, "// site:reserve"))
	}
	for _, c := range []struct {
		s      *stackprof.Site
		marker string
		kind   string
	}{{widget, "// site:widget", "new"}, {buffer, "// site:buffer", "realloc"}} {
		leaf := c.s.Leaf()
		if filepath.Base(leaf.File) != "sites.cpp" || leaf.Line != sourceLine(t, c.marker) {
			t.Errorf("%s at %s, want sites.cpp:%d", leaf.Function, leaf.Position(), sourceLine(t, c.marker))
		}
		if leaf.Module != st.exe && !strings.HasSuffix(leaf.Module, filepath.Base(st.exe)) {
			t.Errorf("%s in module %q, want %s", leaf.Function, leaf.Module, st.exe)
		}
		if leaf.BuildID == "" || leaf.BuildID != testutil.FileBuildID(t, st.exe) {
			t.Errorf("%s's build-id %q, want the executable's", leaf.Function, leaf.BuildID)
		}
		if c.s.Stop != unwind.StopEnd {
			t.Errorf("%s's stack stopped with %s", leaf.Function, c.s.Stop)
		}
		if len(c.s.Kinds) != 1 || c.s.Kinds[0] != c.kind {
			t.Errorf("%s's kinds %v, want [%s]", leaf.Function, c.s.Kinds, c.kind)
		}
		// The root is libc's thread start, the chain complete.
		if root := c.s.Frames[0]; !strings.Contains(root.Module, "libc.so") {
			t.Errorf("root frame %s in %s, want libc's clone", root.Name(), root.Module)
		}
		for _, f := range c.s.Frames {
			if f.MappingID < 1 || f.MappingID > len(p.Mappings) || p.Mappings[f.MappingID-1].File != f.Module {
				t.Errorf("frame %s: mapping %d does not name its module %s", f.Name(), f.MappingID, f.Module)
			}
		}
	}
	if f := widget.Frames[len(widget.Frames)-1]; f.Mangled != "_Znwm" {
		t.Errorf("operator new's symbol is %q", f.Mangled)
	}
	if m := p.Mappings[0]; m.File != st.exe || m.BuildID != testutil.FileBuildID(t, st.exe) || m.Offset != 0 || !m.HasLines {
		t.Errorf("first mapping %+v, want the executable, at offset 0, with lines", m)
	}

	// The estimates, from the formula itself: a block of s bytes is
	// sampled with probability 1-exp(-s/R) and stands for 1/p blocks.
	weight := func(s float64) float64 { return 1 / (1 - math.Exp(-s/fixtureRate)) }
	ww, wb := weight(104), weight(64<<10)
	for _, c := range []struct {
		s    *stackprof.Site
		want stackprof.Estimate
		cnt  stackprof.Counts
	}{
		{widget, stackprof.Estimate{AllocObjects: 3 * ww, AllocBytes: 3 * 104 * ww, InUseObjects: 2 * ww, InUseBytes: 2 * 104 * ww},
			stackprof.Counts{Alloc: 3, InUse: 2, AllocBytes: 312, InUseBytes: 208}},
		{buffer, stackprof.Estimate{AllocObjects: 2 * wb, AllocBytes: 2 * 65536 * wb, InUseObjects: 2 * wb, InUseBytes: 2 * 65536 * wb},
			stackprof.Counts{Alloc: 2, InUse: 2, AllocBytes: 2 * 65536, InUseBytes: 2 * 65536}},
	} {
		got := c.s.Est
		for _, v := range [][2]float64{{got.AllocObjects, c.want.AllocObjects}, {got.AllocBytes, c.want.AllocBytes},
			{got.InUseObjects, c.want.InUseObjects}, {got.InUseBytes, c.want.InUseBytes}} {
			if math.Abs(v[0]-v[1]) > 1e-9*v[1] {
				t.Errorf("%s: estimate %+v, want %+v", c.s.Leaf().Function, got, c.want)
				break
			}
		}
		if c.s.Sampled != c.cnt {
			t.Errorf("%s: sampled %+v, want %+v", c.s.Leaf().Function, c.s.Sampled, c.cnt)
		}
	}
	// Sorted by held bytes: 2*64Ki*8.5 > 2*104*5041.
	if p.Sites[0].Leaf().Function != "reserve" {
		t.Errorf("first site is %s, want reserve (holds more)", p.Sites[0].Leaf().Function)
	}
	if g, want := p.Growth(buffer), buffer.Est.InUseBytes/10; math.Abs(g-want) > 1e-6 {
		t.Errorf("buffer growth %.1f B/s, want %.1f", g, want)
	}
	_, tot := p.Total()
	if math.Abs(tot.InUseBytes-(widget.Est.InUseBytes+buffer.Est.InUseBytes)) > 1e-6 {
		t.Errorf("total %+v", tot)
	}
	if top := p.Top(1); len(top) != 1 || top[0].Leaf().Function != "reserve" {
		t.Errorf("Top(1) = %d sites", len(top))
	}
}

// TestBuilderFrees: a sampled block freed later (Free), and a sample at
// the address of a block still held (which must have been freed unseen),
// leave the site's in-use counts; an address never sampled is not freed.
func TestBuilderFrees(t *testing.T) {
	st := startSites(t)
	b := stackprof.NewBuilder(st.u, st.s)
	b.Add(with(st.widget, 0x1000, 100))
	b.Add(with(st.widget, 0x2000, 100))
	if !b.Free(0x1000, 0, time.Second) || b.Free(0x1000, 0, time.Second) || b.Free(0x9000, 0, time.Second) {
		t.Error("Free: want true once for a held sampled block, false after and for an unsampled one")
	}
	b.Add(with(st.buffer, 0x2000, 4096)) // 0x2000's widget is gone
	p := b.Profile(stackprof.Window{Duration: time.Second})
	for _, s := range p.Sites {
		want := map[string]stackprof.Counts{
			"make_widget": {Alloc: 2, InUse: 0, AllocBytes: 200},
			"reserve":     {Alloc: 1, InUse: 1, AllocBytes: 4096, InUseBytes: 4096},
		}[s.Leaf().Function]
		if s.Sampled != want {
			t.Errorf("%s: %+v, want %+v", s.Leaf().Function, s.Sampled, want)
		}
		// Rate 0: every allocation recorded, each counts for itself.
		if s.Est.AllocObjects != float64(s.Sampled.Alloc) || s.Est.InUseBytes != float64(s.Sampled.InUseBytes) {
			t.Errorf("%s: with every allocation recorded the estimate %+v is not the count", s.Leaf().Function, s.Est)
		}
	}
	if top := p.Top(0); len(top) != 1 || top[0].Leaf().Function != "reserve" {
		t.Errorf("Top lists %d sites; only reserve holds anything", len(top))
	}

	// Stamps order records that arrive apart: a free stamped before the
	// held block's allocation was for an earlier block at that address
	// (a realloc's free recorded late), and a sample stamped before the
	// held one was freed unseen itself.
	b = stackprof.NewBuilder(st.u, st.s)
	stamped := func(r stackprof.Raw, s uint64) stackprof.Raw { r.Stamp = s; return r }
	b.Add(stamped(with(st.widget, 0x1000, 100), 10))
	if b.Free(0x1000, 5, time.Second) {
		t.Error("a free stamped 5 took the block allocated at 10")
	}
	b.Add(stamped(with(st.buffer, 0x1000, 4096), 3))
	if !b.Free(0x1000, 11, time.Second) {
		t.Error("the free stamped 11 did not find the block allocated at 10")
	}
	if s := b.Profile(stackprof.Window{Duration: time.Second}).Sites; len(s) != 2 || s[0].Sampled.InUse+s[1].Sampled.InUse != 0 {
		t.Errorf("stamped: %+v", s)
	}

	// A free that comes before its allocation's record (in an earlier
	// drain: the ring was read up to a record still being written, and
	// the free ring past it) frees the block when its record comes; one
	// stamped before the allocation does not.
	b = stackprof.NewBuilder(st.u, st.s)
	if b.Free(0x3000, 20, time.Second) || b.Free(0x4000, 2, time.Second) {
		t.Error("a free with no block held freed one")
	}
	b.Add(stamped(with(st.widget, 0x3000, 100), 15))
	b.Add(stamped(with(st.buffer, 0x4000, 4096), 7))
	for _, s := range b.Profile(stackprof.Window{Duration: time.Second}).Sites {
		want := map[string]int{"make_widget": 0, "reserve": 1}[s.Leaf().Function]
		if s.Sampled.InUse != want {
			t.Errorf("%s: %d held, want %d (the free stamped 20 came before the allocation at 15; the one at 2 was for an earlier block)", s.Leaf().Function, s.Sampled.InUse, want)
		}
	}

	// With a minimum age, a block allocated too close to the window's end
	// is not held.
	b = stackprof.NewBuilder(st.u, st.s)
	b.MinAge = 2 * time.Second
	old, young := with(st.widget, 0x1000, 100), with(st.widget, 0x2000, 100)
	old.At, young.At = 3*time.Second, 9*time.Second
	b.Add(old)
	b.Add(young)
	if s := b.Profile(stackprof.Window{Duration: 10 * time.Second}).Sites; len(s) != 1 || s[0].Sampled.InUse != 1 || s[0].Sampled.Alloc != 2 {
		t.Errorf("with a minimum age of 2s over 10s, blocks from 3s and 9s: %+v", s)
	}
}

// TestBuilderRealloc: a realloc's sample counts what the call added to
// the block, and no new block; a shrink adds nothing. A sampled block that
// realloc moved keeps its samples held at the new address, where a later
// realloc's sample joins them (not taken for a block freed unseen), a
// move that comes before the sample it moves (an earlier drain) is
// applied when the sample comes, and the block's free frees them all
// (issue 29).
func TestBuilderRealloc(t *testing.T) {
	st := startSites(t)
	b := stackprof.NewBuilder(st.u, st.s)
	stamped := func(r stackprof.Raw, s, old, oldSize uint64) stackprof.Raw {
		r.Stamp, r.Old, r.OldSize = s, old, oldSize
		return r
	}
	b.Add(stamped(with(st.widget, 0x1000, 100), 1, 0, 0))
	b.Move(0x1000, 0x5000, 2, time.Second)                         // grown and moved, the call not sampled
	b.Add(stamped(with(st.buffer, 0x5000, 4096), 4, 0x5000, 1000)) // grown in place: +3096
	b.Move(0x5000, 0x7000, 5, time.Second)
	b.Add(stamped(with(st.buffer, 0x7000, 8192), 6, 0x5000, 4104)) // moved: +4088
	b.Add(stamped(with(st.buffer, 0x9000, 512), 8, 0x8000, 1000))  // a shrink of an unsampled block
	held := func(want map[string]stackprof.Counts) {
		t.Helper()
		for _, s := range b.Profile(stackprof.Window{Duration: time.Second}).Sites {
			if got := s.Sampled; got != want[s.Leaf().Function] {
				t.Errorf("%s: %+v, want %+v", s.Leaf().Function, got, want[s.Leaf().Function])
			}
			if s.Leaf().Function == "reserve" && s.Est.AllocObjects != 0 {
				t.Errorf("reserve: reallocs of existing blocks estimated as %v new blocks", s.Est.AllocObjects)
			}
		}
	}
	// oneBlock checks that want is held, frees the block at addr (stamp),
	// and checks that every sample of it went with the free.
	oneBlock := func(what string, want map[string]stackprof.Counts, addr, stamp uint64) {
		t.Helper()
		held(want)
		if !b.Free(addr, stamp, time.Second) {
			t.Errorf("%s: the block's free found nothing held", what)
		}
		freed := map[string]stackprof.Counts{}
		for fn, c := range want {
			freed[fn] = stackprof.Counts{Alloc: c.Alloc, AllocBytes: c.AllocBytes}
		}
		held(freed)
	}
	held(map[string]stackprof.Counts{
		"make_widget": {Alloc: 1, InUse: 1, AllocBytes: 100, InUseBytes: 100},
		"reserve":     {Alloc: 3, InUse: 3, AllocBytes: 3096 + 4088, InUseBytes: 3096 + 4088},
	})
	if !b.Free(0x7000, 9, time.Second) {
		t.Error("the free of the moved block found nothing held")
	}
	held(map[string]stackprof.Counts{
		"make_widget": {Alloc: 1, AllocBytes: 100},
		"reserve":     {Alloc: 3, InUse: 1, AllocBytes: 3096 + 4088}, // the shrink's sample, held, counts 0 bytes
	})

	// A move read before the allocation it moves, then its free.
	b = stackprof.NewBuilder(st.u, st.s)
	b.Move(0x3000, 0x4000, 12, time.Second)
	b.Free(0x4000, 13, time.Second)
	b.Add(stamped(with(st.widget, 0x3000, 100), 11, 0, 0))
	b.Move(0x2000, 0x6000, 22, time.Second)
	b.Add(stamped(with(st.widget, 0x2000, 100), 21, 0, 0))
	held(map[string]stackprof.Counts{"make_widget": {Alloc: 2, InUse: 1, AllocBytes: 200, InUseBytes: 100}})
	if !b.Free(0x6000, 23, time.Second) {
		t.Error("the block moved by an early move is not held at its new address")
	}

	// One block (widget at 0x3000, 11), moved to 0x4000 by a sampled
	// realloc (its move 12, its sample 13), then freed (14), with its
	// records read in two orders: the allocation after the move and after
	// the realloc's sample (its ring held it back); the realloc's sample
	// before its move (a drain reads the free ring first: the realloc
	// came between the two reads, its move in the next drain). The same
	// block either way, both samples held, not one taken for the other
	// freed unseen.
	moved := func(r stackprof.Raw, move uint32) stackprof.Raw {
		r.Moved = move
		return r
	}
	widget := func() { b.Add(stamped(with(st.widget, 0x3000, 1000), 11, 0, 0)) }
	move := func() { b.Move(0x3000, 0x4000, 12, time.Second) }
	grow := func() { b.Add(moved(stamped(with(st.buffer, 0x4000, 4096), 13, 0x3000, 1000), 12)) }
	// The widget and one realloc of it, both held.
	grownOnce := map[string]stackprof.Counts{
		"make_widget": {Alloc: 1, InUse: 1, AllocBytes: 1000, InUseBytes: 1000},
		"reserve":     {Alloc: 1, InUse: 1, AllocBytes: 3096, InUseBytes: 3096},
	}
	for _, order := range [][]func(){{move, grow, widget}, {widget, grow, move}} {
		b = stackprof.NewBuilder(st.u, st.s)
		for _, f := range order {
			f()
		}
		oneBlock("moved by a sampled realloc", grownOnce, 0x4000, 14)
	}

	// A later realloc between the same two addresses, of another block,
	// read before the move and the free that came between: the first
	// block is not taken for the one there now. Moved, then freed at
	// 0x4000 (13); another block at 0x3000 (14) moved to 0x4000 by a
	// sampled realloc (15, its move 15 not read yet).
	b = stackprof.NewBuilder(st.u, st.s)
	b.Add(stamped(with(st.widget, 0x3000, 1000), 11, 0, 0))
	b.Add(moved(stamped(with(st.buffer, 0x4000, 4096), 16, 0x3000, 1000), 15))
	b.Move(0x3000, 0x4000, 12, time.Second)
	b.Free(0x4000, 13, time.Second)
	held(map[string]stackprof.Counts{
		"make_widget": {Alloc: 1, AllocBytes: 1000},
		"reserve":     {Alloc: 1, InUse: 1, AllocBytes: 3096, InUseBytes: 3096},
	})

	// A block's realloc sampled (stamp 13), then the block freed or moved
	// by a realloc not sampled (14), read in that order by one drain: the
	// free ring first, so the free or move is applied to the block's
	// earlier sample (widget, 11) before the realloc's sample is read. The
	// realloc's sample is of that block and shares its fate; it stayed
	// held before, a realloc-grown site 3 to 8 % high where drains are
	// far apart (after.go).
	inPlace := func() { b.Add(stamped(with(st.buffer, 0x3000, 4096), 13, 0x3000, 1000)) }
	movedIn := func() { b.Add(moved(stamped(with(st.buffer, 0x4000, 4096), 13, 0x3000, 1000), 12)) }
	for _, c := range []struct {
		name  string
		steps []func()
		held  map[string]stackprof.Counts
	}{
		{"grown in place, then freed", []func(){widget, func() { b.Free(0x3000, 14, time.Second) }, inPlace},
			map[string]stackprof.Counts{"make_widget": {Alloc: 1, AllocBytes: 1000}, "reserve": {Alloc: 1, AllocBytes: 3096}}},
		{"moved in by the sampled realloc, then freed", []func(){widget, move, func() { b.Free(0x4000, 14, time.Second) }, movedIn},
			map[string]stackprof.Counts{"make_widget": {Alloc: 1, AllocBytes: 1000}, "reserve": {Alloc: 1, AllocBytes: 3096}}},
		{"grown in place, then moved", []func(){widget, func() { b.Move(0x3000, 0x5000, 14, time.Second) }, inPlace},
			map[string]stackprof.Counts{"make_widget": {Alloc: 1, InUse: 1, AllocBytes: 1000, InUseBytes: 1000}, "reserve": {Alloc: 1, InUse: 1, AllocBytes: 3096, InUseBytes: 3096}}},
		{"grown in place, moved, grown again, then read", []func(){widget, func() { b.Move(0x3000, 0x5000, 14, time.Second) },
			func() { b.Add(stamped(with(st.buffer, 0x5000, 8192), 15, 0x5000, 4104)) }, inPlace},
			map[string]stackprof.Counts{"make_widget": {Alloc: 1, InUse: 1, AllocBytes: 1000, InUseBytes: 1000}, "reserve": {Alloc: 2, InUse: 2, AllocBytes: 3096 + 4088, InUseBytes: 3096 + 4088}}},
	} {
		b = stackprof.NewBuilder(st.u, st.s)
		for _, f := range c.steps {
			f()
		}
		t.Run(c.name, func(t *testing.T) { held(c.held) })
		if c.held["make_widget"].InUse == 0 {
			continue
		}
		// Still the one block, wherever it is now.
		oneBlock(c.name, c.held, 0x5000, 16)
	}

	// The same with the move read before both of the block's samples
	// (two reallocs in place, 12 and 13, then the move, 14): the first
	// sample takes the move (an orphan), the second follows the block
	// there. Seen in a drain of a window at a rate of 8 MiB: the second
	// stayed held at the old address.
	b = stackprof.NewBuilder(st.u, st.s)
	b.Move(0x3000, 0x5000, 14, time.Second)
	b.Add(stamped(with(st.buffer, 0x3000, 4096), 12, 0x3000, 1000))
	b.Add(stamped(with(st.buffer, 0x3000, 8192), 13, 0x3000, 4104))
	oneBlock("the move read first", map[string]stackprof.Counts{"reserve": {Alloc: 2, InUse: 2, AllocBytes: 3096 + 4088, InUseBytes: 3096 + 4088}}, 0x5000, 16)

	// A realloc in place (13) read before the block's allocation (11),
	// held back a drain in the other ring: one block, both held, both
	// freed by its free (14). Before, the allocation was taken for a block
	// freed unseen.
	b = stackprof.NewBuilder(st.u, st.s)
	inPlace()
	widget()
	oneBlock("the realloc read first", grownOnce, 0x3000, 14)
	// A block moved in by its own sampled realloc (11, to 0x3000), then
	// on to 0x4000 by one not sampled (12), grown in place there (13) and
	// moved on to 0x5000 (14); read: the move to 0x4000 (an orphan), the
	// sample there, the move away, then the first sample, which takes the
	// orphan and arrives at 0x4000 after the block left. One block.
	b = stackprof.NewBuilder(st.u, st.s)
	b.Move(0x3000, 0x4000, 12, time.Second)
	b.Add(stamped(with(st.buffer, 0x4000, 8192), 13, 0x4000, 4104))
	b.Move(0x4000, 0x5000, 14, time.Second)
	b.Add(stamped(with(st.buffer, 0x3000, 4096), 11, 0x2000, 1000))
	oneBlock("the first sample read last", map[string]stackprof.Counts{"reserve": {Alloc: 2, InUse: 2, AllocBytes: 3096 + 4088, InUseBytes: 3096 + 4088}}, 0x5000, 16)

	// A block with two samples at 0x3000 (11, 12) moved to 0x4000 (13, not
	// sampled) and grown in place there (14), the growth read before the
	// move: the moved samples go below it, all three one block.
	b = stackprof.NewBuilder(st.u, st.s)
	widget()
	b.Add(stamped(with(st.buffer, 0x3000, 4096), 12, 0x3000, 1000))
	b.Add(stamped(with(st.buffer, 0x4000, 8192), 14, 0x4000, 4104))
	b.Move(0x3000, 0x4000, 13, time.Second)
	oneBlock("the growth read before the move", map[string]stackprof.Counts{
		"make_widget": {Alloc: 1, InUse: 1, AllocBytes: 1000, InUseBytes: 1000},
		"reserve":     {Alloc: 2, InUse: 2, AllocBytes: 3096 + 4088, InUseBytes: 3096 + 4088},
	}, 0x4000, 16)

	// Not when a free at that address is known between the two (12,
	// taken by a block there before, 9): two blocks, the earlier freed.
	b = stackprof.NewBuilder(st.u, st.s)
	b.Add(stamped(with(st.widget, 0x3000, 1000), 9, 0, 0))
	b.Free(0x3000, 12, time.Second)
	inPlace()
	widget()
	held(map[string]stackprof.Counts{
		"make_widget": {Alloc: 2, AllocBytes: 2000},
		"reserve":     {Alloc: 1, InUse: 1, AllocBytes: 3096, InUseBytes: 3096},
	})
}

// TestBuildOddStacks: a stack copy cut short and a pc in no module (JIT
// code, or garbage) still make sites, counted as incomplete, that every
// codec takes.
func TestBuildOddStacks(t *testing.T) {
	st := startSites(t)
	short := with(st.widget, 0x1000, 4096)
	short.Stack.Data = short.Stack.Data[:24] // the return address into make_widget, little more
	lost := with(st.widget, 0x2000, 4096)
	lost.Start.Regs.SetPCOf(arch.Host(), 0x10) // no module there
	p := stackprof.Build([]stackprof.Raw{short, lost, with(st.buffer, 0x3000, 4096)},
		stackprof.Window{Duration: time.Second, Rate: 512 << 10}, st.u, st.s)
	if p.Samples != 3 || p.Incomplete != 2 || p.Truncated != 1 || len(p.Sites) != 3 {
		t.Fatalf("%d samples, %d incomplete, %d truncated, %d sites; want 3, 2, 1, 3", p.Samples, p.Incomplete, p.Truncated, len(p.Sites))
	}
	for _, s := range p.Sites {
		names := strings.Join(siteNames(&s), " > ")
		switch {
		case s.Stop == unwind.StopTruncated:
			if !strings.HasSuffix(names, "make_widget > operator new") || s.Leaf().Function != "make_widget" {
				t.Errorf("the cut stack is %s", names)
			}
		case s.Stop == unwind.StopNoModule:
			if names != "0x10" || s.Frames[0].MappingID != 0 {
				t.Errorf("the stack in no module is %s (mapping %d)", names, s.Frames[0].MappingID)
			}
		case s.Stop != unwind.StopEnd:
			t.Errorf("a site stopped with %s: %s", s.Stop, names)
		}
	}
	var pb, fb bytes.Buffer
	if err := stackprof.WritePprof(&pb, p); err != nil {
		t.Fatal(err)
	}
	if pp, err := profile.Parse(&pb); err != nil || pp.CheckValid() != nil || len(pp.Sample) != 3 {
		t.Errorf("pprof of odd stacks: %v", err)
	}
	if err := stackprof.WriteFolded(&fb, p); err != nil || !strings.Contains(fb.String(), "\n0x10 ") && !strings.HasPrefix(fb.String(), "0x10 ") {
		t.Errorf("folded of odd stacks:\n%s", fb.String())
	}
	b, err := json.Marshal(schema.NewLeaks(1, p, nil))
	if err != nil {
		t.Fatal(err)
	}
	testutil.ValidateJSON(t, "leaks", b)
}

// TestCallWithoutEntry: when the allocator's entry is not known, the
// allocating function is the leaf, looked up inside its call instruction:
// the call's line, and the chain above it intact.
func TestCallWithoutEntry(t *testing.T) {
	st := startSites(t)
	r := stackprof.Raw{Addr: 0x1000, Size: 64, Kind: "new"}
	r.Start, r.Stack = st.widgetCall.Unwind()
	r.Start.HaveCalleeSaved = false
	p := stackprof.Build([]stackprof.Raw{r}, stackprof.Window{Duration: time.Second}, st.u, st.s)
	if len(p.Sites) != 1 {
		t.Fatalf("%d sites", len(p.Sites))
	}
	s := &p.Sites[0]
	expectTail(t, s, []string{"widget_main", "server::handle", "cache<int>::fill", "make_widget"})
	if leaf := s.Leaf(); leaf.Line != sourceLine(t, "// site:widget") || s.Stop != unwind.StopEnd {
		t.Errorf("make_widget at %s, stop %s; want sites.cpp:%d, end", leaf.Position(), s.Stop, sourceLine(t, "// site:widget"))
	}
}

// TestBuilderDropFreed: forgetting freed samples (a recording's Builder,
// kept for days) leaves what is held, and the chains of a realloc'd
// block, as they were: a later free of a moved block still frees all
// its samples, and a free of a dropped block's address finds nothing.
func TestBuilderDropFreed(t *testing.T) {
	st := startSites(t)
	b := stackprof.NewBuilder(st.u, st.s)
	stamped := func(r stackprof.Raw, s, old, oldSize uint64) stackprof.Raw {
		r.Stamp, r.Old, r.OldSize = s, old, oldSize
		return r
	}
	b.Add(stamped(with(st.widget, 0x1000, 100), 1, 0, 0))
	b.Add(stamped(with(st.widget, 0x2000, 100), 2, 0, 0))
	b.Add(stamped(with(st.buffer, 0x3000, 1000), 3, 0, 0))
	b.Add(stamped(with(st.buffer, 0x3000, 4096), 4, 0x3000, 1000)) // grown in place: one block, two samples
	b.Free(0x1000, 5, time.Second)
	inUse := func() map[string]stackprof.Counts {
		m := map[string]stackprof.Counts{}
		for _, s := range b.Profile(stackprof.Window{Duration: time.Second}).Sites {
			m[s.Leaf().Function] = stackprof.Counts{InUse: s.Sampled.InUse, InUseBytes: s.Sampled.InUseBytes}
		}
		return m
	}
	before := inUse()
	if n := b.DropFreed(0); n != 1 {
		t.Fatalf("dropped %d samples, want the 1 freed", n)
	}
	if after := inUse(); after["make_widget"] != before["make_widget"] || after["reserve"] != before["reserve"] {
		t.Fatalf("held before dropping %+v, after %+v", before, after)
	}
	if b.Free(0x1000, 6, time.Second) {
		t.Error("the dropped block's address freed something")
	}
	b.Move(0x3000, 0x5000, 7, time.Second)
	if !b.Free(0x5000, 8, time.Second) {
		t.Fatal("the moved block's free found nothing held")
	}
	if got := inUse()["reserve"]; got.InUse != 0 {
		t.Errorf("reserve after its block's free: %+v held, want none of its two samples", got)
	}
	b.Free(0x9000, 9, 2*time.Second) // a free whose allocation never comes
	if n := b.DropFreed(time.Second); n != 2 {
		t.Errorf("dropped %d, want the block's 2 samples", n)
	}
	b.Add(stamped(with(st.widget, 0x9000, 100), 8, 0, 0))
	if got := inUse()["make_widget"]; got.InUse != 1 {
		t.Errorf("a free kept (after the time given) did not free its block when it came: %+v", got)
	}
	b.Free(0x9200, 11, 4*time.Second) // its allocation was dropped: it never comes
	b.DropFreed(5 * time.Second)
	b.Add(stamped(with(st.widget, 0x9200, 100), 10, 0, 0)) // came after the free was forgotten
	if got := inUse()["make_widget"]; got.InUse != 2 {
		t.Errorf("a block whose free was forgotten: %+v held, want it held with the one before", got)
	}
}
