package alloc

// Pool hands out fixed-size buffers of one memory area by index. It has one owner (a queue's
// goroutine): no locks, and Get/Put never allocate. A buffer's bytes are at
// offset Base + index*BufSize of the area.
type Pool struct {
	free    []uint32 // stack of free buffer indices; free[:n] are valid
	n       int
	Base    uint32 // offset of buffer 0 in its region
	BufSize uint32
}

// NewPool makes a pool of count buffers, all free.
func NewPool(count int, base, bufSize uint32) *Pool {
	p := &Pool{free: make([]uint32, count), n: count, Base: base, BufSize: bufSize}
	for i := range p.free {
		// Hand out low indices first: neighbouring buffers share pages and cache lines.
		p.free[i] = uint32(count - 1 - i)
	}
	return p
}

// Cap is the number of buffers the pool manages.
func (p *Pool) Cap() int { return len(p.free) }

// Available is the number of free buffers.
func (p *Pool) Available() int { return p.n }

// Get fills dst with free buffer indices, as many as are available, and returns how many.
func (p *Pool) Get(dst []uint32) int {
	k := min(len(dst), p.n)
	p.n -= k
	// The stack top is at the end: copy it reversed so that dst[0] is the lowest index handed out.
	src := p.free[p.n : p.n+k]
	for i := range k {
		dst[i] = src[k-1-i]
	}
	return k
}

// Put returns buffers. Returning more buffers than the pool manages means a double free: it
// panics rather than corrupt the free list, as that is a bug in the caller, not bad input.
func (p *Pool) Put(idx []uint32) {
	if p.n+len(idx) > len(p.free) {
		panic("alloc: Pool.Put of more buffers than were taken")
	}
	for i := len(idx) - 1; i >= 0; i-- {
		p.free[p.n] = idx[i]
		p.n++
	}
}

// Offset is the region offset of buffer idx.
func (p *Pool) Offset(idx uint32) uint32 { return p.Base + idx*p.BufSize }

// GetOne takes one free buffer; false when none is left.
func (p *Pool) GetOne() (uint32, bool) {
	if p.n == 0 {
		return 0, false
	}
	p.n--
	return p.free[p.n], true
}

// PutOne returns one buffer; see Put.
func (p *Pool) PutOne(idx uint32) {
	if p.n == len(p.free) {
		panic("alloc: Pool.PutOne of more buffers than were taken")
	}
	p.free[p.n] = idx
	p.n++
}
