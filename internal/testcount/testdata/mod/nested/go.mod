module example.org/other
