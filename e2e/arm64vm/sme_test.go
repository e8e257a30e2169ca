package arm64vm

import "testing"

// sme: a thread of testdata/sme.c in SME streaming mode with ZA on
// (checking SVCR on every turn of a user-code loop) is passed over by
// info --thread, with its reason, since the call's frame has no SME
// record; info borrows the main thread, and the SME thread finds its
// state whole. Skips without SME (no guest kernel here has it,
// docs/arm64.md).
func (g *guest) sme(t *testing.T) { g.passedOver(t, "sme", "SME") }
