package memifprom_test

import (
	"fmt"
	"log"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memifprom"
)

// An application registers one Collector for its ports and serves the registry (here on a
// mux it would pass to http.ListenAndServe).
func Example() {
	server, err := memif.Open(memif.Config{Role: memif.RoleServer, Socket: "@memifprom-example", Name: "west",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer server.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(memifprom.New(server))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		fmt.Println(f.GetName())
	}
	// Output:
	// memifnet_port_bad_descriptors_total
	// memifnet_port_drops_total
	// memifnet_port_link_transitions_total
	// memifnet_port_ring_full_total
	// memifnet_port_rx_bytes_total
	// memifnet_port_rx_no_buffers_total
	// memifnet_port_rx_packets_total
	// memifnet_port_tx_bytes_total
	// memifnet_port_tx_packets_total
	// memifnet_port_up
}
