package main

import "unsafe"

// uintptrOf passes a pointer to a raw system call (capset). Safe: the pointee is a local that the
// call reads and the caller keeps alive across it; no Go pointer is stored by the kernel.
func uintptrOf[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }
