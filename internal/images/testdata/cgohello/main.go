// Command cgohello is a cgo program for the image builder's tests: its
// image must carry the C library and the dynamic loader.
package main

// #include <stdlib.h>
import "C"

import "fmt"

func main() { fmt.Println(C.abs(-42)) }
