// Command memif-cni-podinfo is memif-cni's helper for runtimes that do not pass pod annotations:
// it reads a podquery.Query on stdin, asks the kubelet's Pods API or the API server, and writes a
// podquery.Answer on stdout. It is installed next to memif-cni; nothing else runs it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/memifnet/memifnet/cmd/internal/podquery"
	"github.com/memifnet/memifnet/cmd/memif-cni-podinfo/internal/podapi"
	"github.com/memifnet/memifnet/internal/names"
)

func main() {
	var q podquery.Query
	dec := json.NewDecoder(os.Stdin)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&q); err != nil {
		fmt.Fprintf(os.Stderr, "%s: read query: %v\n", names.PodInfoHelper, err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(q.TimeoutSeconds)*time.Second)
	defer cancel()
	if err := json.NewEncoder(os.Stdout).Encode(podapi.Lookup(ctx, q)); err != nil {
		fmt.Fprintf(os.Stderr, "%s: write answer: %v\n", names.PodInfoHelper, err)
		os.Exit(1)
	}
}
