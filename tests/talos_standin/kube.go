package main

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"k8s.io/client-go/util/retry"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/siderolabs/talos/pkg/machinery/labels"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
)

// Keys of the Node's metadata Talos writes and owns (pkg/machinery/constants).
const (
	extensionPrefix  = "extensions.talos.dev/"
	ownedLabels      = "talos.dev/owned-labels"
	ownedAnnotations = "talos.dev/owned-annotations"
)

// applyNodeMetadata writes what Talos writes on its Node for its extensions
// (internal/app/machined/pkg/controllers/k8s/node_label_spec.go and
// node_annotation_spec.go): extensions.talos.dev/<name> = <version>, as a label when the
// version is a valid label value, else as an annotation (so the 64-digit schematic ID is
// an annotation); and as node_apply.go does, it takes over a key only when the Node lacks
// it or Talos owns it (talos.dev/owned-labels, talos.dev/owned-annotations), and removes
// the keys it owns and no longer wants.
func (s *server) applyNodeMetadata(n *node) {
	wantLabels, wantAnnotations := map[string]string{}, map[string]string{}
	listing, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	statuses, err := safe.StateListAll[*runtime.ExtensionStatus](listing, n.cosi)
	if err == nil {
		for status := range statuses.All() {
			name := extensionPrefix + status.TypedSpec().Metadata.Name
			value := status.TypedSpec().Metadata.Version
			if status.TypedSpec().Metadata.Name == "" || labels.ValidateQualifiedName(name) != nil {
				continue
			}
			if labels.ValidateLabelValue(value) == nil {
				wantLabels[name] = value
			} else {
				wantAnnotations[name] = value
			}
		}
	}
	if err == nil {
		err = untilAPI(func(ctx context.Context) error {
			return s.updateNodeMetadata(ctx, n, wantLabels, wantAnnotations)
		})
	}
	fields := map[string]any{"labels": wantLabels, "annotations": wantAnnotations}
	if err != nil {
		fields["error"] = err.Error()
	}
	s.log("node-metadata", n, fields)
}

// untilAPI calls write until the API server takes it, for at most apiPatience: a kubelet
// posts its Node's status, and machined's Node controllers apply their labels, until the
// API server answers (pkg/kubelet/kubelet_node_status.go retries each
// nodeStatusUpdateFrequency for ever; a controller of machined is run again on error), so
// an API server away for a few seconds still hears of a boot.
func untilAPI(write func(context.Context) error) error {
	deadline := time.Now().Add(apiPatience)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := write(ctx)
		cancel()
		if err == nil || !transient(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// transient says whether err may pass when the API server is back: it was not reached,
// or it answered that it cannot serve now. A refusal (not found, forbidden, invalid) is
// final.
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	return apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsInternalError(err)
}

// apiPatience bounds untilAPI: longer than any outage the tests make.
const apiPatience = 90 * time.Second

// updateNodeMetadata is node_apply.go's update of the Node's labels and annotations, on a
// conflict read again.
func (s *server) updateNodeMetadata(ctx context.Context, n *node, wantLabels, wantAnnotations map[string]string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		found, err := s.kube.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if found.Labels == nil {
			found.Labels = map[string]string{}
		}
		if found.Annotations == nil {
			found.Annotations = map[string]string{}
		}
		before := [2]map[string]string{maps.Clone(found.Labels), maps.Clone(found.Annotations)}
		ownedL, ownedA := owned(found.Annotations[ownedLabels]), owned(found.Annotations[ownedAnnotations])
		applyKV(found.Labels, ownedL, wantLabels)
		applyKV(found.Annotations, ownedA, wantAnnotations)
		writeOwned(found.Annotations, ownedLabels, ownedL)
		writeOwned(found.Annotations, ownedAnnotations, ownedA)
		if maps.Equal(before[0], found.Labels) && maps.Equal(before[1], found.Annotations) {
			return nil
		}
		_, err = s.kube.CoreV1().Nodes().Update(ctx, found, metav1.UpdateOptions{})
		return err
	})
}

func owned(raw string) map[string]struct{} {
	var keys []string
	_ = json.Unmarshal([]byte(raw), &keys)
	set := map[string]struct{}{}
	for _, k := range keys {
		set[k] = struct{}{}
	}
	return set
}

func writeOwned(annotations map[string]string, key string, set map[string]struct{}) {
	keys := slices.Sorted(maps.Keys(set))
	if len(keys) == 0 {
		delete(annotations, key)
		return
	}
	raw, _ := json.Marshal(keys)
	annotations[key] = string(raw)
}

// applyKV is node_apply.go's applyNodeKV.
func applyKV(current map[string]string, ownedKeys map[string]struct{}, want map[string]string) {
	for key, value := range want {
		currentValue, exists := current[key]
		switch {
		case !exists:
			current[key] = value
			ownedKeys[key] = struct{}{}
		case currentValue == value:
			ownedKeys[key] = struct{}{}
		default:
			if _, mine := ownedKeys[key]; mine {
				current[key] = value
			}
		}
	}
	for key := range ownedKeys {
		if _, keep := want[key]; !keep {
			delete(current, key)
			delete(ownedKeys, key)
		}
	}
}
