package draattr

import "encoding/json"

// PortStatus is the data of a socket device's entry in a claim's status.devices: the port the
// DRA driver wired into the slot (as port.json in the slot has it). The driver writes it (and
// keeps it in its checkpoint); kubectl-memifnet reads it (docs/dra.md).
type PortStatus struct {
	Port   string `json:"port"` // the port's name
	Role   string `json:"role"`
	Socket string `json:"socket"` // in the container
	Link   string `json:"link,omitempty"`
	// HostSocket is a host port's socket as the node sees it, for the host data plane.
	HostSocket string `json:"hostSocket,omitempty"`
}

// UnmarshalJSON also reads what agents before one status type wrote, which named the port's
// name "name".
func (s *PortStatus) UnmarshalJSON(b []byte) error {
	type plain PortStatus
	var v struct {
		plain
		Name string `json:"name"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = PortStatus(v.plain)
	if s.Port == "" {
		s.Port = v.Name
	}
	return nil
}
