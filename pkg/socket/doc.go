// Package socket is the memif control channel: a SOCK_SEQPACKET Unix socket (filesystem path or
// abstract "@name") carrying fixed 128-byte messages, some with one file descriptor attached
// (SCM_RIGHTS), plus the codec for those messages.
//
// The codec follows the memif protocol 2.0 wire layout used by libmemif, VPP and DPDK's net_memif:
// packed C structs in the host's byte order. Decoding is byte-wise at fixed offsets and never
// trusts padding: a peer may leave unused bytes uninitialised.
package socket
