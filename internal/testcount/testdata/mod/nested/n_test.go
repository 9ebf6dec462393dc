package nested

import "testing"

func TestElsewhere(t *testing.T) {}
