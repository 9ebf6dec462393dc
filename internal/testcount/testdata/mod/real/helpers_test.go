package real_test

import tb "example.org/mod/internal/testbed"

type env struct{}

func newEnv() *env { _ = tb.Shared; return &env{} }

func (e *env) do() {}
