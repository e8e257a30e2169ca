package unwind

import (
	"encoding/binary"
	"errors"
)

// The DWARF expressions CFI uses on x86-64 are short: PLT entries
// (rsp + 8 + ((rip & 15) >= 11) * 8), signal frames (breg7 + off, deref),
// a few realigned-stack prologues (breg6 - 8, deref). This evaluates the
// stack-machine subset those need; anything else makes the frame
// unrecoverable rather than guessed.

var errExpr = errors.New("unsupported or malformed DWARF expression")

const maxExprStack = 64

// eval runs expr with the initial stack push (nil for none), reading
// registers from regs and memory through read.
func eval(expr []byte, push *uint64, regs *regSet, read func(uint64) (uint64, error)) (uint64, error) {
	var st [maxExprStack]uint64
	n := 0
	pushv := func(v uint64) error {
		if n == maxExprStack {
			return errExpr
		}
		st[n] = v
		n++
		return nil
	}
	if push != nil {
		pushv(*push)
	}
	uleb := func(i int) (uint64, int, error) {
		var v uint64
		var shift uint
		for ; i < len(expr); i++ {
			b := expr[i]
			if shift < 64 {
				v |= uint64(b&0x7f) << shift
			}
			shift += 7
			if b&0x80 == 0 {
				return v, i + 1, nil
			}
		}
		return 0, i, errExpr
	}
	sleb := func(i int) (int64, int, error) {
		var v int64
		var shift uint
		for ; i < len(expr); i++ {
			b := expr[i]
			if shift < 64 {
				v |= int64(b&0x7f) << shift
			}
			shift += 7
			if b&0x80 == 0 {
				if shift < 64 && b&0x40 != 0 {
					v |= -1 << shift
				}
				return v, i + 1, nil
			}
		}
		return 0, i, errExpr
	}
	fixed := func(i, size int) (uint64, int, error) {
		if i+size > len(expr) {
			return 0, i, errExpr
		}
		var b [8]byte
		copy(b[:], expr[i:i+size])
		return binary.LittleEndian.Uint64(b[:]), i + size, nil
	}
	pop2 := func() (a, b uint64, err error) {
		if n < 2 {
			return 0, 0, errExpr
		}
		n -= 2
		return st[n], st[n+1], nil
	}
	b2u := func(c bool) uint64 {
		if c {
			return 1
		}
		return 0
	}
	for i := 0; i < len(expr); {
		op := expr[i]
		i++
		var err error
		switch {
		case op >= 0x30 && op <= 0x4f: // DW_OP_lit0..31
			err = pushv(uint64(op - 0x30))
		case op >= 0x70 && op <= 0x8f: // DW_OP_breg0..31
			var off int64
			off, i, err = sleb(i)
			if err == nil {
				r := op - 0x70
				if r >= nRegs || !regs.has(int(r)) {
					return 0, errExpr
				}
				err = pushv(regs.v[r] + uint64(off))
			}
		case op >= 0x50 && op <= 0x6f: // DW_OP_reg0..31: a location, not a value
			return 0, errExpr
		default:
			switch op {
			case 0x08, 0x09: // const1u, const1s
				var v uint64
				v, i, err = fixed(i, 1)
				if op == 0x09 {
					v = uint64(int8(v))
				}
				if err == nil {
					err = pushv(v)
				}
			case 0x0a, 0x0b: // const2u, const2s
				var v uint64
				v, i, err = fixed(i, 2)
				if op == 0x0b {
					v = uint64(int16(v))
				}
				if err == nil {
					err = pushv(v)
				}
			case 0x0c, 0x0d: // const4u, const4s
				var v uint64
				v, i, err = fixed(i, 4)
				if op == 0x0d {
					v = uint64(int32(v))
				}
				if err == nil {
					err = pushv(v)
				}
			case 0x0e, 0x0f: // const8u, const8s
				var v uint64
				v, i, err = fixed(i, 8)
				if err == nil {
					err = pushv(v)
				}
			case 0x10: // constu
				var v uint64
				v, i, err = uleb(i)
				if err == nil {
					err = pushv(v)
				}
			case 0x11: // consts
				var v int64
				v, i, err = sleb(i)
				if err == nil {
					err = pushv(uint64(v))
				}
			case 0x12: // dup
				if n < 1 {
					return 0, errExpr
				}
				err = pushv(st[n-1])
			case 0x13: // drop
				if n < 1 {
					return 0, errExpr
				}
				n--
			case 0x14: // over
				if n < 2 {
					return 0, errExpr
				}
				err = pushv(st[n-2])
			case 0x16: // swap
				if n < 2 {
					return 0, errExpr
				}
				st[n-1], st[n-2] = st[n-2], st[n-1]
			case 0x06: // deref
				if n < 1 {
					return 0, errExpr
				}
				v, rerr := read(st[n-1])
				if rerr != nil {
					return 0, rerr
				}
				st[n-1] = v
			case 0x23: // plus_uconst
				var v uint64
				v, i, err = uleb(i)
				if err == nil {
					if n < 1 {
						return 0, errExpr
					}
					st[n-1] += v
				}
			case 0x1f: // neg
				if n < 1 {
					return 0, errExpr
				}
				st[n-1] = -st[n-1]
			case 0x20: // not
				if n < 1 {
					return 0, errExpr
				}
				st[n-1] = ^st[n-1]
			case 0x1a, 0x1c, 0x1e, 0x21, 0x22, 0x24, 0x25, 0x26, 0x27, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e:
				var a, b uint64
				a, b, err = pop2()
				if err != nil {
					return 0, err
				}
				var v uint64
				switch op {
				case 0x1a:
					v = a & b
				case 0x1c:
					v = a - b
				case 0x1e:
					v = a * b
				case 0x21:
					v = a | b
				case 0x22:
					v = a + b
				case 0x24:
					v = a << (b & 63)
				case 0x25:
					v = a >> (b & 63)
				case 0x26:
					v = uint64(int64(a) >> (b & 63))
				case 0x27:
					v = a ^ b
				case 0x29:
					v = b2u(a == b)
				case 0x2a:
					v = b2u(int64(a) >= int64(b))
				case 0x2b:
					v = b2u(int64(a) > int64(b))
				case 0x2c:
					v = b2u(int64(a) <= int64(b))
				case 0x2d:
					v = b2u(int64(a) < int64(b))
				case 0x2e:
					v = b2u(a != b)
				}
				err = pushv(v)
			case 0x96: // nop
			default:
				return 0, errExpr
			}
		}
		if err != nil {
			return 0, err
		}
	}
	if n < 1 {
		return 0, errExpr
	}
	return st[n-1], nil
}
