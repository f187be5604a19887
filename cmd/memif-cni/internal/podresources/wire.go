package podresources

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// The subset of k8s.io/kubelet/pkg/apis/podresources/v1 (api.proto) the plugin reads. Field
// numbers are the proto's; fields not listed here are skipped, as any proto3 reader does.
type podResources struct {
	name, namespace string         // 1, 2
	containers      []containerRes // 3
}

type containerRes struct {
	devices []containerDevices // 2
}

type containerDevices struct {
	resourceName string   // 1
	deviceIDs    []string // 2
}

// podResourcesField is the pod_resources field of both Get and List responses.
var podResourcesField = []protowire.Number{1}

// encodeGetRequest encodes GetPodResourcesRequest{pod_name = 1, pod_namespace = 2}.
func encodeGetRequest(name, namespace string) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, name)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendString(b, namespace)
}

// decodeGetResponse decodes GetPodResourcesResponse{PodResources pod_resources = 1}; nil if absent.
func decodeGetResponse(b []byte) (*podResources, error) {
	var pod *podResources
	err := fields(b, podResourcesField, func(num protowire.Number, v []byte) error {
		if num != 1 {
			return nil
		}
		// Proto3 merges repeated occurrences of a message field; the kubelet sends one.
		p, err := decodePod(v)
		pod = &p
		return err
	})
	return pod, err
}

// decodeListResponse decodes ListPodResourcesResponse{repeated PodResources pod_resources = 1}.
func decodeListResponse(b []byte) ([]podResources, error) {
	var pods []podResources
	err := fields(b, podResourcesField, func(num protowire.Number, v []byte) error {
		if num != 1 {
			return nil
		}
		p, err := decodePod(v)
		pods = append(pods, p)
		return err
	})
	return pods, err
}

func decodePod(b []byte) (podResources, error) {
	var p podResources
	err := fields(b, []protowire.Number{1, 2, 3}, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			p.name = string(v)
		case 2:
			p.namespace = string(v)
		case 3:
			c, err := decodeContainer(v)
			p.containers = append(p.containers, c)
			return err
		}
		return nil
	})
	if err != nil {
		return p, fmt.Errorf("PodResources: %w", err)
	}
	return p, nil
}

func decodeContainer(b []byte) (containerRes, error) {
	var c containerRes
	err := fields(b, []protowire.Number{2}, func(num protowire.Number, v []byte) error {
		if num != 2 {
			return nil
		}
		var d containerDevices
		err := fields(v, []protowire.Number{1, 2}, func(num protowire.Number, v []byte) error {
			switch num {
			case 1:
				d.resourceName = string(v)
			case 2:
				d.deviceIDs = append(d.deviceIDs, string(v))
			}
			return nil
		})
		c.devices = append(c.devices, d)
		return err
	})
	if err != nil {
		return c, fmt.Errorf("ContainerResources: %w", err)
	}
	return c, nil
}

// fields calls fn for each length-delimited field of the message b and skips the others after
// checking that they are well formed. A known field (all of ours are strings or messages) that
// arrives with another wire type is an error, as in the generated code.
func fields(b []byte, known []protowire.Number, fn func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("field tag: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if slices.Contains(known, num) {
				return fmt.Errorf("field %d has wire type %d, want %d (length-delimited)", num, typ, protowire.BytesType)
			}
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, v); err != nil {
			return err
		}
	}
	return nil
}
