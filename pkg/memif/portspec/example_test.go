package portspec_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// An application in a pod finds the ports memif-cni wired for it and opens one by name.
func ExampleDiscover() {
	specs, err := portspec.Discover() // reads /run/memifnet/*/port.json
	if err != nil {
		log.Fatal(err)
	}
	spec, ok := portspec.Lookup(specs, "east")
	if !ok {
		fmt.Println("no port east in this pod")
		return
	}
	ifc, err := memif.OpenPort(spec) // right role, socket, secret and sizes; the pod's pool if any
	if err != nil {
		log.Fatal(err)
	}
	defer ifc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ifc.WaitUp(ctx); err != nil {
		log.Fatal(err)
	}
	ifc.TxQueue(0).TxBurst([][]byte{[]byte("hello")})
}
