package pure

import "testing"

func helper() int { return 1 }

func TestPure(t *testing.T) { _ = helper() }

func BenchmarkPure(b *testing.B) {}

func TestMain(m *testing.M) {}

func Testlowercase(t *testing.T) {}
