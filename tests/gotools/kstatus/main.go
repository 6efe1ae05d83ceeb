// Command kstatus prints the status kstatus (sigs.k8s.io/cli-utils/pkg/kstatus/status)
// computes for Kubernetes objects: the reading `kubectl wait`-style tools, Flux and
// Argo CD build on. It is a test tool, not part of Ichor; the component tests run it to
// check that every kind reports status in the shape those tools read.
//
// Two modes, one JSON object per line on stdout for each object, in order:
//
//	kstatus get -kubeconfig FILE REF...   read each object from the API server
//	kstatus compute                       read objects (JSON: one object, a List, or a
//	                                      stream of them) from stdin
//
// REF is GROUP/VERSION/RESOURCE/NAMESPACE/NAME, VERSION/RESOURCE/NAMESPACE/NAME for the
// core group, with an empty NAMESPACE for a cluster-scoped kind
// (apiextensions.k8s.io/v1/customresourcedefinitions//talosclusters.ichor.dev).
//
// Each answer: {"apiVersion","kind","namespace","name","generation","status","message",
// "conditions":[{"type","status","reason","message"}]}, where status is one of
// InProgress, Failed, Current, Terminating, NotFound (get: the object does not exist) or
// Unknown, with "error" set when kstatus could not compute it (a field of the wrong type).
// A REF that does not parse, a kubeconfig that does not load or an API error other than
// NotFound ends the run with exit code 1 and the reason on stderr.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type answer struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Namespace  string      `json:"namespace"`
	Name       string      `json:"name"`
	Generation int64       `json:"generation"`
	Status     string      `json:"status"`
	Message    string      `json:"message"`
	Conditions []condition `json:"conditions"`
	Error      string      `json:"error,omitempty"`
}

func compute(u *unstructured.Unstructured) answer {
	a := answer{
		APIVersion: u.GetAPIVersion(),
		Kind:       u.GetKind(),
		Namespace:  u.GetNamespace(),
		Name:       u.GetName(),
		Generation: u.GetGeneration(),
		Conditions: []condition{},
	}
	result, err := status.Compute(u)
	if err != nil {
		a.Status, a.Error = string(status.UnknownStatus), err.Error()
		return a
	}
	a.Status, a.Message = string(result.Status), result.Message
	for _, c := range result.Conditions {
		a.Conditions = append(a.Conditions, condition{
			Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message,
		})
	}
	return a
}

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: kstatus get -kubeconfig FILE REF... | kstatus compute < objects.json"))
	}
	out := json.NewEncoder(os.Stdout)
	var err error
	switch os.Args[1] {
	case "get":
		err = get(os.Args[2:], out)
	case "compute":
		err = computeStdin(os.Stdin, out)
	default:
		err = fmt.Errorf("unknown mode %q: get or compute", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "kstatus: %v\n", err)
	os.Exit(1)
}

type ref struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

func parseRef(text string) (ref, error) {
	parts := strings.Split(text, "/")
	if len(parts) == 4 { // the core group
		parts = append([]string{""}, parts...)
	}
	if len(parts) != 5 || parts[1] == "" || parts[2] == "" || parts[4] == "" {
		return ref{}, fmt.Errorf("%q is not GROUP/VERSION/RESOURCE/NAMESPACE/NAME (VERSION/RESOURCE/NAMESPACE/NAME for the core group)", text)
	}
	return ref{
		gvr:       schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]},
		namespace: parts[3],
		name:      parts[4],
	}, nil
}

func get(args []string, out *json.Encoder) error {
	flags := flag.NewFlagSet("get", flag.ContinueOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig file of the API server to read from")
	timeout := flags.Duration("timeout", 30*time.Second, "bound on each read")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *kubeconfig == "" || flags.NArg() == 0 {
		return errors.New("get needs -kubeconfig FILE and at least one REF")
	}
	refs := make([]ref, 0, flags.NArg())
	for _, text := range flags.Args() {
		r, err := parseRef(text)
		if err != nil {
			return err
		}
		refs = append(refs, r)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	config.UserAgent = "ichor-test-kstatus"
	client, err := dynamic.NewForConfig(config)
	if err != nil {
		return err
	}
	for _, r := range refs {
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		u, err := client.Resource(r.gvr).Namespace(r.namespace).Get(ctx, r.name, metav1.GetOptions{})
		cancel()
		if apierrors.IsNotFound(err) {
			if err := out.Encode(answer{
				Namespace: r.namespace, Name: r.name, Status: string(status.NotFoundStatus),
				Message: "Resource not found", Conditions: []condition{},
			}); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("reading %s %s/%s: %w", r.gvr, r.namespace, r.name, err)
		}
		if err := out.Encode(compute(u)); err != nil {
			return err
		}
	}
	return nil
}

func computeStdin(in io.Reader, out *json.Encoder) error {
	dec := json.NewDecoder(bufio.NewReader(in))
	for n := 1; ; n++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("stdin value %d is not JSON: %w", n, err)
		}
		// apimachinery's own decoding, so numbers are int64 as read from the API server.
		var probe struct {
			Items json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return fmt.Errorf("stdin value %d is not a JSON object: %w", n, err)
		}
		if probe.Items != nil {
			list := &unstructured.UnstructuredList{}
			if err := list.UnmarshalJSON(raw); err != nil {
				return fmt.Errorf("stdin value %d: %w", n, err)
			}
			for i := range list.Items {
				if err := out.Encode(compute(&list.Items[i])); err != nil {
					return err
				}
			}
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("stdin value %d: %w", n, err)
		}
		if err := out.Encode(compute(u)); err != nil {
			return err
		}
	}
}
