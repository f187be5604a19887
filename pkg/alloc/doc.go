// Package alloc provides the memory memif moves packets through: shared regions backed by memfd
// or hugetlbfs memory that can be handed to a peer by file descriptor, and fixed-size buffer pools
// with index free lists for the data path.
package alloc
