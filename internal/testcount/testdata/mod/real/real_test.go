package real_test

import "testing"

func start() *env { return newEnv() }

func TestThroughTwoHelpers(t *testing.T) { start().do() }

func TestAlone(t *testing.T) {}

func FuzzReal(f *testing.F) { newEnv() }
