package podlookup

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRuntimeAnnotationsNeedNoHelper(t *testing.T) {
	ann, src, err := Annotations(context.Background(), Pod{Namespace: "ns", Name: "p"},
		Options{RuntimeAnnotations: map[string]string{"a": "b"}, KubeletURL: "https://127.0.0.1:10250"})
	if err != nil || src != SourceRuntime || ann["a"] != "b" {
		t.Fatalf("%v %v %v", ann, src, err)
	}
}

func TestNoSource(t *testing.T) {
	_, _, err := Annotations(context.Background(), Pod{Namespace: "ns", Name: "p"}, Options{KubeletURL: "none", Timeout: time.Second})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no kubeconfig") {
		t.Fatalf("error %v", err)
	}
}

// The test binary has no helper next to it, as a broken install would not.
func TestMissingHelper(t *testing.T) {
	_, _, err := Annotations(context.Background(), Pod{Namespace: "ns", Name: "p"}, Options{KubeletURL: "https://127.0.0.1:10250", Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "memif-cni-podinfo (installed next to memif-cni)") {
		t.Fatalf("error %v", err)
	}
}
