package maps

import (
	"strings"
	"testing"
)

const sampleMaps = `55d0c8a00000-55d0c8a02000 r--p 00000000 fe:00 247278                     /usr/bin/my prog
55d0c8a02000-55d0c8a08000 r-xp 00002000 fe:00 247278                     /usr/bin/my prog
55d0c9c1e000-55d0c9c3f000 rw-p 00000000 00:00 0                          [heap]
7f0e2c000000-7f0e2c021000 rw-p 00000000 00:00 0                          [anon: glibc: malloc arena]
7f0e2c021000-7f0e30000000 ---p 00000000 00:00 0                          [anon: glibc: malloc arena]
7f0e34000000-7f0e34021000 rw-p 00000000 00:00 0 
7f0e37a00000-7f0e37a01000 rw-s 00000000 00:01 1047                       /memfd:shared buf (deleted)
7f0e37b00000-7f0e37b26000 r--p 00000000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
7f0e37c00000-7f0e37c01000 r--p 00000000 fe:00 1234                       /tmp/a  b (deleted)
7ffd1a2b3000-7ffd1a2d4000 rw-p 00000000 00:00 0                          [stack]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
`

func TestParseMaps(t *testing.T) {
	ms, err := ParseMaps(strings.NewReader(sampleMaps))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		start, end uint64
		perms      string
		offset     uint64
		dev        string
		inode      uint64
		path       string
		deleted    bool
	}{
		{0x55d0c8a00000, 0x55d0c8a02000, "r--p", 0, "fe:00", 247278, "/usr/bin/my prog", false},
		{0x55d0c8a02000, 0x55d0c8a08000, "r-xp", 0x2000, "fe:00", 247278, "/usr/bin/my prog", false},
		{0x55d0c9c1e000, 0x55d0c9c3f000, "rw-p", 0, "00:00", 0, "[heap]", false},
		{0x7f0e2c000000, 0x7f0e2c021000, "rw-p", 0, "00:00", 0, "[anon: glibc: malloc arena]", false},
		{0x7f0e2c021000, 0x7f0e30000000, "---p", 0, "00:00", 0, "[anon: glibc: malloc arena]", false},
		{0x7f0e34000000, 0x7f0e34021000, "rw-p", 0, "00:00", 0, "", false},
		{0x7f0e37a00000, 0x7f0e37a01000, "rw-s", 0, "00:01", 1047, "/memfd:shared buf (deleted)", true},
		{0x7f0e37b00000, 0x7f0e37b26000, "r--p", 0, "fe:00", 326269, "/usr/lib/x86_64-linux-gnu/libc.so.6", false},
		{0x7f0e37c00000, 0x7f0e37c01000, "r--p", 0, "fe:00", 1234, "/tmp/a  b (deleted)", true},
		{0x7ffd1a2b3000, 0x7ffd1a2d4000, "rw-p", 0, "00:00", 0, "[stack]", false},
		{0xffffffffff600000, 0xffffffffff601000, "--xp", 0, "00:00", 0, "[vsyscall]", false},
	}
	if len(ms) != len(want) {
		t.Fatalf("got %d mappings, want %d: %+v", len(ms), len(want), ms)
	}
	for i, w := range want {
		m := ms[i]
		if m.Start != w.start || m.End != w.end || m.Perms != w.perms || m.Offset != w.offset ||
			m.Dev != w.dev || m.Inode != w.inode || m.Path != w.path || m.Deleted != w.deleted {
			t.Errorf("mapping %d = %+v, want %+v", i, m, w)
		}
	}
}

func TestParseMapsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text, wantErr string
	}{
		{"short", "00400000-00452000 r-xp 00000000 08:02\n", "line 1"},
		{"no dash", "00400000 r-xp 00000000 08:02 173521 /bin/x\n", "line 1"},
		{"bad hex", "0040000g-00452000 r-xp 00000000 08:02 173521 /bin/x\n", "start address"},
		{"end before start", "00452000-00400000 r-xp 00000000 08:02 173521 /bin/x\n", "end before start"},
		{"bad perms", "00400000-00452000 r-x 00000000 08:02 173521 /bin/x\n", "perms"},
		{"bad inode", "00400000-00452000 r-xp 00000000 08:02 -1 /bin/x\n", "inode"},
		{"bad device", "00400000-00452000 r-xp 00000000 0802 1 /bin/x\n", "device"},
		{"third line", sampleMaps[:strings.Index(sampleMaps, "55d0c9c1e000")] + "\ngarbage here\n", "line 4"},
		{"smaps field in maps", "Rss: 4 kB\n", "line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := ParseMaps(strings.NewReader(tc.text))
			if err == nil {
				t.Fatalf("no error; got %+v", ms)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not mention %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseMapsEmpty(t *testing.T) {
	ms, err := ParseMaps(strings.NewReader(""))
	if err != nil || len(ms) != 0 {
		t.Errorf("ParseMaps(\"\") = %v, %v; want no mappings, no error", ms, err)
	}
}

const sampleSmaps = `559073862000-559073864000 r--p 00000000 fe:00 247278                     /usr/bin/head
Size:                  8 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                   8 kB
Pss:                   8 kB
Pss_Dirty:             0 kB
Shared_Clean:          0 kB
Shared_Dirty:          0 kB
Private_Clean:         8 kB
Private_Dirty:         0 kB
Referenced:            8 kB
Anonymous:             0 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
THPeligible:           0
ProtectionKey:         0
VmFlags: rd mr mw me 
7f0e2c000000-7f0e2c400000 rw-p 00000000 00:00 0                          [anon: glibc: malloc arena]
Size:               4096 kB
Rss:                3072 kB
Pss:                1536 kB
Shared_Clean:          4 kB
Shared_Dirty:         12 kB
Private_Clean:        16 kB
Private_Dirty:      3040 kB
Anonymous:          3052 kB
AnonHugePages:      2048 kB
Swap:                100 kB
VmFlags: rd wr mr mw me ac 
7f0e37c00000-7f0e37c01000 r--p 00000000 fe:00 1234                       /tmp/a b (deleted)
Rss:                   4 kB
`

func TestParseSmaps(t *testing.T) {
	ms, err := ParseSmaps(strings.NewReader(sampleSmaps))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 {
		t.Fatalf("got %d mappings, want 3: %+v", len(ms), ms)
	}
	if m := ms[0]; m.Path != "/usr/bin/head" || m.Rss != 8<<10 || m.Pss != 8<<10 || m.PrivateClean != 8<<10 {
		t.Errorf("mapping 0 = %+v", m)
	}
	arena := Mapping{
		Start: 0x7f0e2c000000, End: 0x7f0e2c400000, Perms: "rw-p", Dev: "00:00",
		Path:        "[anon: glibc: malloc arena]",
		Rss:         3072 << 10,
		Pss:         1536 << 10,
		SharedClean: 4 << 10, SharedDirty: 12 << 10,
		PrivateClean: 16 << 10, PrivateDirty: 3040 << 10,
		Anonymous: 3052 << 10, AnonHugePages: 2048 << 10,
		Swap: 100 << 10,
	}
	if ms[1] != arena {
		t.Errorf("mapping 1 = %+v\nwant        %+v", ms[1], arena)
	}
	if m := ms[2]; m.Path != "/tmp/a b (deleted)" || !m.Deleted || m.Rss != 4<<10 {
		t.Errorf("mapping 2 = %+v", m)
	}
}

func TestParseSmapsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text, wantErr string
	}{
		{"field first", "Rss: 4 kB\n", "line 1"},
		{"no unit", "00400000-00452000 r-xp 00000000 08:02 1 /bin/x\nRss: 4\n", "line 2"},
		{"not a number", "00400000-00452000 r-xp 00000000 08:02 1 /bin/x\nPss: x kB\n", "line 2"},
		{"overflow", "00400000-00452000 r-xp 00000000 08:02 1 /bin/x\nSwap: 18446744073709551615 kB\n", "overflow"},
		{"bad header", "00400000-00452000 r-xp 00000000 08:02 1 /bin/x\nRss: 4 kB\nnonsense\n", "line 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := ParseSmaps(strings.NewReader(tc.text))
			if err == nil {
				t.Fatalf("no error; got %+v", ms)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not mention %q", err, tc.wantErr)
			}
		})
	}
}

const sampleRollup = `55bf841b9000-7ffc4d503000 ---p 00000000 00:00 0                          [rollup]
Rss:                1760 kB
Pss:                 535 kB
Pss_Dirty:           112 kB
Pss_Anon:            112 kB
Pss_File:            423 kB
Pss_Shmem:             1 kB
Shared_Clean:       1568 kB
Shared_Dirty:          2 kB
Private_Clean:        80 kB
Private_Dirty:       112 kB
Referenced:         1760 kB
Anonymous:           113 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         3 kB
ShmemPmdMapped:        0 kB
Swap:                  5 kB
SwapPss:               4 kB
Locked:                0 kB
`

func TestParseRollup(t *testing.T) {
	ru, err := ParseRollup(strings.NewReader(sampleRollup))
	if err != nil {
		t.Fatal(err)
	}
	want := Rollup{
		Rss: 1760 << 10, Pss: 535 << 10,
		PssAnon: 112 << 10, PssFile: 423 << 10, PssShmem: 1 << 10,
		SharedClean: 1568 << 10, SharedDirty: 2 << 10,
		PrivateClean: 80 << 10, PrivateDirty: 112 << 10,
		Anonymous: 113 << 10, AnonHugePages: 3 << 10,
		Swap: 5 << 10, SwapPss: 4 << 10,
	}
	if ru != want {
		t.Errorf("ParseRollup = %+v\nwant          %+v", ru, want)
	}
}

func TestParseRollupErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text, wantErr string
	}{
		{"empty", "", "no [rollup] header"},
		{"no header", "Rss: 4 kB\n", "line 1"},
		{"two headers", sampleRollup + sampleRollup, "line 21"},
		{"bad value", sampleRollup[:strings.Index(sampleRollup, "\n")+1] + "Rss: 4 MB\n", "line 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ru, err := ParseRollup(strings.NewReader(tc.text))
			if err == nil {
				t.Fatalf("no error; got %+v", ru)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not mention %q", err, tc.wantErr)
			}
		})
	}
}
