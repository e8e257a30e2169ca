package bpf

import (
	"encoding/binary"
	"testing"
)

// Jumps land on their labels, forward and back, and encode as the kernel
// reads struct bpf_insn (code, dst and src in one byte, off, imm).
func TestAsmLabels(t *testing.T) {
	var a Asm
	a.Label("top")
	a.Emit(MovImm(R0, 0))
	a.If(JEq, R1, 7, "out")
	a.Emit(LoadMap(R2, 5)...)
	a.Goto("top")
	a.Label("out")
	a.Emit(Exit())
	insns, err := a.Insns()
	if err != nil {
		t.Fatal(err)
	}
	// 0 mov, 1 jeq -> 5, 2-3 ld_imm64, 4 ja -> 0, 5 exit
	if insns[1].Off != 3 || insns[4].Off != -5 {
		t.Fatalf("offsets %d and %d, want 3 and -5", insns[1].Off, insns[4].Off)
	}
	b := encode(insns)
	if b[8] != 0x15 || b[9] != 0x01 || int16(binary.LittleEndian.Uint16(b[10:])) != 3 || binary.LittleEndian.Uint32(b[12:]) != 7 {
		t.Errorf("jeq encoded as % x", b[8:16])
	}
	if b[16] != 0x18 || b[17] != 0x12 || binary.LittleEndian.Uint32(b[20:]) != 5 {
		t.Errorf("map load encoded as % x", b[16:24])
	}
	a.Goto("nowhere")
	if _, err := a.Insns(); err == nil {
		t.Error("a jump to no label assembled")
	}
}
