//go:build !race

package testbed

// RaceDetector is true when this binary was built with -race: agents the
// tests start are then built with it too, so that the race detector
// watches the processes, not only the test's own code.
const RaceDetector = false
