package testbed

import "testing"

// TestFreePortsNeverGivenTwice: a range overlapping ports given before is
// refused whole (none of it is recorded); one beside them is given.
func TestFreePortsNeverGivenTwice(t *testing.T) {
	// Far below any port FreePorts picks, so that no other test's ports
	// are in the way.
	if !claimPorts(100, 3) {
		t.Fatal("ports 100-102, never given, were refused")
	}
	if claimPorts(102, 2) {
		t.Error("ports 102-103 were given although 102 was")
	}
	if !claimPorts(103, 1) {
		t.Error("port 103 was recorded by the refused claim")
	}
	if claimPorts(99, 2) {
		t.Error("ports 99-100 were given although 100 was")
	}
}
