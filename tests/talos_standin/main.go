// Command talos-standin answers the Talos machine API for the node tests, as the apid of
// a Talos control plane node does: over mutual TLS with the talosconfig's CA, routing each
// call to the node its gRPC metadata names ("node", or "nodes" for a fan-out), on the API
// types of github.com/siderolabs/talos/pkg/machinery (the version talosctl is built from).
//
// It serves what `talosctl upgrade` (the LifecycleService path of Talos 1.13+, with its
// defaults: drain, reboot, wait) and `talosctl version` ask of a node, and nothing else:
//
//   - MachineService.Version: the version each node runs;
//   - ImageService.Pull: records the installer as pulled (it fetches nothing: a real node
//     would pull it from the Image Factory);
//   - LifecycleService.Upgrade: stages the installer's version (refused when the image was
//     not pulled first, as Talos does);
//   - MachineService.Kubeconfig: the workload cluster's kubeconfig (drain and uncordon use
//     it), as a .tar.gz stream;
//   - COSI State.Get of Nodenames.kubernetes.talos.dev: the node's Kubernetes name;
//   - MachineService.Read of /proc/sys/kernel/random/boot_id;
//   - MachineService.Reboot: the node goes away (its event streams end, calls answer
//     Unavailable, its Node turns NotReady) for -down, then boots the staged version: a
//     new boot ID, the workload Node's osImage and bootID moved and Ready, and the events
//     a booted Talos replays (the boot sequence, then the machine RUNNING and ready);
//   - MachineService.Events: those events, with tail -1 / N / 0 as talosctl asks.
//
// Everything else answers Unimplemented (a COSI Get of another resource: NotFound, saying
// so), which is how `talosctl upgrade-k8s` fails against it. A client certificate not
// signed by the CA fails the TLS handshake; one without the os:admin role is refused with
// PermissionDenied.
//
// Each call is logged as one JSON line on stdout ({"call": ..., "node": ..., ...}); the
// first line says where it listens. It listens on a loopback address only; the tests
// forward the node's address to it.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
)

// adminRole is the role of the talosconfig's client certificate (its Organization).
const adminRole = "os:admin"

var osImage = regexp.MustCompile(`^Talos \((v[0-9]+\.[0-9]+\.[0-9]+[^)]*)\)$`)

// installerTag reads the version from an installer reference: <registry>/<path>:<tag>.
var installerTag = regexp.MustCompile(`^[^@\s]+/[^@\s:]+:(v[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+-]*)$`)

type node struct {
	mu        sync.Mutex
	name      string // the workload Node's name
	address   string // the address talosctl names it by (--nodes)
	version   string // what it runs
	staged    string // what its next boot runs
	pulled    map[string]bool
	bootID    string
	down      bool
	events    []*machine.Event // since this boot
	listeners map[chan *machine.Event]struct{}
}

type server struct {
	nodes      map[string]*node // by address
	endpoint   *node            // the node the talosconfig's endpoint is (the first -node)
	kube       kubernetes.Interface
	kubeconfig []byte // what MachineService.Kubeconfig hands out
	downFor    time.Duration
	bootOld    map[string]bool // nodes that boot their previous version back after an upgrade
	failOn     map[string]bool // nodes whose installer exits 1
	logMu      sync.Mutex
	eventSeq   int
}

// One type per service: each embeds its Unimplemented server (the methods not served).
type (
	machineAPI struct {
		machine.UnimplementedMachineServiceServer
		s *server
	}
	imageAPI struct {
		machine.UnimplementedImageServiceServer
		s *server
	}
	lifecycleAPI struct {
		machine.UnimplementedLifecycleServiceServer
		s *server
	}
	stateAPI struct {
		v1alpha1.UnimplementedStateServer
		s *server
	}
)

func (s *server) log(call string, n *node, fields map[string]any) {
	entry := map[string]any{"time": time.Now().UTC().Format(time.RFC3339Nano), "call": call}
	if n != nil {
		entry["node"] = n.name
		entry["address"] = n.address
	}
	for k, v := range fields {
		entry[k] = v
	}
	line, _ := json.Marshal(entry)
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Println(string(line))
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func bootID() string {
	id := randomID()
	return fmt.Sprintf("%s-%s-%s-%s-%s", id[0:8], id[8:12], id[12:16], id[16:20], id[20:32])
}

// targets are the nodes a call is for: "node" (one, proxied), "nodes" (a fan-out), or
// the endpoint itself when the metadata names none.
func (s *server) targets(ctx context.Context) ([]*node, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	names := md.Get("nodes")
	if len(names) == 0 {
		names = md.Get("node")
	}
	if len(names) == 0 {
		return []*node{s.endpoint}, nil
	}
	var found []*node
	for _, raw := range names {
		for _, address := range strings.Split(raw, ",") {
			n, ok := s.nodes[strings.TrimSpace(address)]
			if !ok {
				known := make([]string, 0, len(s.nodes))
				for a := range s.nodes {
					known = append(known, a)
				}
				slices.Sort(known)
				return nil, status.Errorf(codes.Unavailable,
					"no Talos node answers at %s (this Talos API stand-in serves %s)", address, strings.Join(known, ", "))
			}
			found = append(found, n)
		}
	}
	return found, nil
}

func (s *server) one(ctx context.Context) (*node, error) {
	found, err := s.targets(ctx)
	if err != nil {
		return nil, err
	}
	if len(found) != 1 {
		return nil, status.Errorf(codes.InvalidArgument, "this call goes to one node, not %d", len(found))
	}
	return found[0], nil
}

func (n *node) up() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down {
		return status.Errorf(codes.Unavailable, "node %s is rebooting", n.address)
	}
	return nil
}

func hostname(n *node) *common.Metadata { return &common.Metadata{Hostname: n.address} }

// --- MachineService -------------------------------------------------------------------

func (api machineAPI) Version(ctx context.Context, _ *emptypb.Empty) (*machine.VersionResponse, error) {
	s := api.s
	found, err := s.targets(ctx)
	if err != nil {
		return nil, err
	}
	response := &machine.VersionResponse{}
	for _, n := range found {
		if err := n.up(); err != nil {
			return nil, err
		}
		n.mu.Lock()
		version := n.version
		n.mu.Unlock()
		response.Messages = append(response.Messages, &machine.Version{
			Metadata: hostname(n),
			Version: &machine.VersionInfo{
				Tag: version, Os: "linux", Arch: runtime.GOARCH, GoVersion: runtime.Version(),
			},
			Platform: &machine.PlatformInfo{Name: "metal", Mode: "metal"},
		})
		s.log("version", n, map[string]any{"version": version})
	}
	return response, nil
}

func (api machineAPI) Kubeconfig(_ *emptypb.Empty, stream grpc.ServerStreamingServer[common.Data]) error {
	s := api.s
	n, err := s.one(stream.Context())
	if err != nil {
		return err
	}
	if err := n.up(); err != nil {
		return err
	}
	var archive bytes.Buffer
	zipped := gzip.NewWriter(&archive)
	tarred := tar.NewWriter(zipped)
	header := &tar.Header{Name: "kubeconfig", Mode: 0o600, Size: int64(len(s.kubeconfig)), ModTime: time.Now()}
	if err := tarred.WriteHeader(header); err != nil {
		return err
	}
	if _, err := tarred.Write(s.kubeconfig); err != nil {
		return err
	}
	if err := tarred.Close(); err != nil {
		return err
	}
	if err := zipped.Close(); err != nil {
		return err
	}
	s.log("kubeconfig", n, nil)
	return stream.Send(&common.Data{Bytes: archive.Bytes()})
}

func (api machineAPI) Read(request *machine.ReadRequest, stream grpc.ServerStreamingServer[common.Data]) error {
	s := api.s
	n, err := s.one(stream.Context())
	if err != nil {
		return err
	}
	if err := n.up(); err != nil {
		return err
	}
	if request.GetPath() != "/proc/sys/kernel/random/boot_id" {
		return status.Errorf(codes.NotFound, "%s: this Talos API stand-in reads only the boot ID", request.GetPath())
	}
	n.mu.Lock()
	id := n.bootID
	n.mu.Unlock()
	s.log("read", n, map[string]any{"path": request.GetPath(), "bootID": id})
	return stream.Send(&common.Data{Bytes: []byte(id + "\n")})
}

func (api machineAPI) Reboot(ctx context.Context, request *machine.RebootRequest) (*machine.RebootResponse, error) {
	s := api.s
	found, err := s.targets(ctx)
	if err != nil {
		return nil, err
	}
	response := &machine.RebootResponse{}
	for _, n := range found {
		if err := n.up(); err != nil {
			return nil, err
		}
		actor := randomID()
		s.emit(n, actor, &machine.SequenceEvent{Sequence: "reboot", Action: machine.SequenceEvent_START})
		response.Messages = append(response.Messages, &machine.Reboot{Metadata: hostname(n), ActorId: actor})
		s.log("reboot", n, map[string]any{"actor": actor, "mode": request.GetMode().String()})
		go s.reboot(n, actor)
	}
	return response, nil
}

// reboot: the node goes away, then boots what was staged (or, for a node of -boot-old,
// its previous version back, as Talos does when the new one does not come up).
func (s *server) reboot(n *node, actor string) {
	time.Sleep(300 * time.Millisecond)
	n.mu.Lock()
	n.down = true
	for listener := range n.listeners {
		close(listener)
	}
	n.listeners = map[chan *machine.Event]struct{}{}
	n.events = nil
	n.mu.Unlock()
	s.log("down", n, map[string]any{"actor": actor})
	s.patchNode(n, false, "", "")
	time.Sleep(s.downFor)

	n.mu.Lock()
	previous := n.version
	if n.staged != "" && !s.bootOld[n.name] {
		n.version = n.staged
	}
	n.staged = ""
	n.bootID = bootID()
	version, id := n.version, n.bootID
	n.mu.Unlock()
	s.patchNode(n, true, version, id)

	n.mu.Lock()
	n.down = false
	n.mu.Unlock()
	s.emit(n, "", &machine.SequenceEvent{Sequence: "boot", Action: machine.SequenceEvent_START})
	s.emit(n, "", &machine.SequenceEvent{Sequence: "boot", Action: machine.SequenceEvent_STOP})
	s.emit(n, "", &machine.MachineStatusEvent{
		Stage: machine.MachineStatusEvent_RUNNING, Status: &machine.MachineStatusEvent_MachineStatus{Ready: true},
	})
	s.log("boot", n, map[string]any{"version": version, "previous": previous, "bootID": id})
}

// patchNode writes what the node's kubelet would: NotReady while it is away; after the
// boot Ready, with the osImage and boot ID of what booted.
func (s *server) patchNode(n *node, ready bool, version, id string) {
	now := metav1.Now().UTC().Format(time.RFC3339)
	condition := map[string]any{
		"type": "Ready", "status": "False", "reason": "KubeletNotReady",
		"message": "the node is rebooting (Talos API stand-in)", "lastHeartbeatTime": now, "lastTransitionTime": now,
	}
	nodeStatus := map[string]any{"conditions": []any{condition}}
	if ready {
		condition["status"], condition["reason"], condition["message"] = "True", "KubeletReady", "kubelet is posting ready status"
		nodeStatus["nodeInfo"] = map[string]any{"osImage": fmt.Sprintf("Talos (%s)", version), "bootID": id}
	}
	body, _ := json.Marshal(map[string]any{"status": nodeStatus})
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = s.kube.CoreV1().Nodes().Patch(ctx, n.name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
		cancel()
		if err == nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	fields := map[string]any{"ready": ready}
	if ready {
		fields["osImage"] = fmt.Sprintf("Talos (%s)", version)
	}
	if err != nil {
		fields["error"] = err.Error()
	}
	s.log("node-status", n, fields)
}

func (s *server) emit(n *node, actor string, payload proto.Message) {
	value, err := proto.Marshal(payload)
	if err != nil {
		panic(err)
	}
	s.logMu.Lock()
	s.eventSeq++
	id := fmt.Sprintf("%020d", s.eventSeq)
	s.logMu.Unlock()
	event := &machine.Event{
		Metadata: hostname(n),
		Data:     &anypb.Any{TypeUrl: "talos/runtime/" + string(payload.ProtoReflect().Descriptor().FullName()), Value: value},
		Id:       id,
		ActorId:  actor,
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.events = append(n.events, event)
	for listener := range n.listeners {
		select {
		case listener <- event:
		default: // a listener that does not read loses the event, as with Talos's buffer
		}
	}
}

func (api machineAPI) Events(request *machine.EventsRequest, stream grpc.ServerStreamingServer[machine.Event]) error {
	s := api.s
	n, err := s.one(stream.Context())
	if err != nil {
		return err
	}
	listener := make(chan *machine.Event, 64)
	n.mu.Lock()
	if n.down {
		n.mu.Unlock()
		return status.Errorf(codes.Unavailable, "node %s is rebooting", n.address)
	}
	var backlog []*machine.Event
	switch tail := int(request.GetTailEvents()); {
	case tail < 0:
		backlog = slices.Clone(n.events)
	case tail > 0:
		backlog = slices.Clone(n.events[max(0, len(n.events)-tail):])
	}
	n.listeners[listener] = struct{}{}
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.listeners, listener)
		n.mu.Unlock()
	}()
	s.log("events", n, map[string]any{"tail": request.GetTailEvents(), "replayed": len(backlog)})
	matches := func(e *machine.Event) bool {
		return request.GetWithActorId() == "" || e.GetActorId() == request.GetWithActorId()
	}
	// the first message of a watch carries no event (clients read and drop it)
	if err := stream.Send(&machine.Event{Metadata: hostname(n)}); err != nil {
		return err
	}
	for _, event := range backlog {
		if matches(event) {
			if err := stream.Send(event); err != nil {
				return err
			}
		}
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case event, open := <-listener:
			if !open {
				return status.Errorf(codes.Unavailable, "node %s is rebooting", n.address)
			}
			if matches(event) {
				if err := stream.Send(event); err != nil {
					return err
				}
			}
		}
	}
}

// --- ImageService and LifecycleService ------------------------------------------------

func (api imageAPI) Pull(request *machine.ImageServicePullRequest, stream grpc.ServerStreamingServer[machine.ImageServicePullResponse]) error {
	s := api.s
	n, err := s.one(stream.Context())
	if err != nil {
		return err
	}
	if err := n.up(); err != nil {
		return err
	}
	ref := request.GetImageRef()
	if ref == "" {
		return status.Error(codes.InvalidArgument, "image reference is empty")
	}
	n.mu.Lock()
	n.pulled[ref] = true
	n.mu.Unlock()
	s.log("pull", n, map[string]any{"image": ref, "namespace": request.GetContainerd().GetNamespace().String()})
	return stream.Send(&machine.ImageServicePullResponse{Response: &machine.ImageServicePullResponse_Name{Name: ref}})
}

func (api lifecycleAPI) Upgrade(request *machine.LifecycleServiceUpgradeRequest, stream grpc.ServerStreamingServer[machine.LifecycleServiceUpgradeResponse]) error {
	s := api.s
	n, err := s.one(stream.Context())
	if err != nil {
		return err
	}
	if err := n.up(); err != nil {
		return err
	}
	ref := request.GetSource().GetImageName()
	progress := func(message string, exit *int32) error {
		p := &machine.LifecycleServiceInstallProgress{Response: &machine.LifecycleServiceInstallProgress_Message{Message: message}}
		if exit != nil {
			p = &machine.LifecycleServiceInstallProgress{Response: &machine.LifecycleServiceInstallProgress_ExitCode{ExitCode: *exit}}
		}
		return stream.Send(&machine.LifecycleServiceUpgradeResponse{Progress: p})
	}
	fail := func(message string) error {
		s.log("upgrade", n, map[string]any{"image": ref, "error": message})
		if err := progress(message, nil); err != nil {
			return err
		}
		one := int32(1)
		return progress("", &one)
	}
	n.mu.Lock()
	pulled := n.pulled[ref]
	n.mu.Unlock()
	match := installerTag.FindStringSubmatch(ref)
	switch {
	case match == nil:
		return fail(fmt.Sprintf("%q is not an installer reference with a version tag", ref))
	case !pulled:
		return fail(fmt.Sprintf("image %s is not in the node's image store: pull it first", ref))
	case s.failOn[n.name]:
		return fail(fmt.Sprintf("installer %s exited 1 (the stand-in was told to fail on %s)", ref, n.name))
	}
	n.mu.Lock()
	n.staged = match[1]
	n.mu.Unlock()
	s.log("upgrade", n, map[string]any{"image": ref, "staged": match[1]})
	if err := progress(fmt.Sprintf("installing %s; it boots at the next reboot", match[1]), nil); err != nil {
		return err
	}
	zero := int32(0)
	return progress("", &zero)
}

// --- COSI state -----------------------------------------------------------------------

func (api stateAPI) Get(ctx context.Context, request *v1alpha1.GetRequest) (*v1alpha1.GetResponse, error) {
	s := api.s
	n, err := s.one(ctx)
	if err != nil {
		return nil, err
	}
	if err := n.up(); err != nil {
		return nil, err
	}
	if request.GetNamespace() != k8s.NamespaceName || request.GetType() != k8s.NodenameType || request.GetId() != k8s.NodenameID {
		s.log("cosi-get", n, map[string]any{"type": request.GetType(), "id": request.GetId(), "served": false})
		return nil, status.Errorf(codes.NotFound, "resource %s(%s/%s) is not served by this Talos API stand-in",
			request.GetType(), request.GetNamespace(), request.GetId())
	}
	resource := k8s.NewNodename(k8s.NamespaceName, k8s.NodenameID)
	resource.TypedSpec().Nodename = n.name
	resource.TypedSpec().HostnameVersion = "1"
	encoded, err := protobuf.FromResource(resource)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	marshaled, err := encoded.Marshal()
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	s.log("cosi-get", n, map[string]any{"type": request.GetType(), "id": request.GetId(), "served": true})
	return &v1alpha1.GetResponse{Resource: marshaled}, nil
}

// --- authorization --------------------------------------------------------------------

func (s *server) authorize(ctx context.Context, method string) error {
	p, ok := peer.FromContext(ctx)
	if ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.VerifiedChains) > 0 {
			if slices.Contains(info.State.VerifiedChains[0][0].Subject.Organization, adminRole) {
				return nil
			}
		}
	}
	s.log("refused", nil, map[string]any{"method": method})
	return status.Errorf(codes.PermissionDenied, "%s: not authorized (the client certificate has no %s role)", method, adminRole)
}

func (s *server) unary(ctx context.Context, request any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := s.authorize(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, request)
}

func (s *server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := s.authorize(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

// --- main -----------------------------------------------------------------------------

type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "talos-standin: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "loopback address:port to serve on")
	caFile := flag.String("ca", "", "the talosconfig's CA (PEM): client certificates must chain to it")
	certFile := flag.String("cert", "", "serving certificate (PEM), naming the endpoint address")
	keyFile := flag.String("key", "", "serving key (PEM)")
	kubeconfigFile := flag.String("kubeconfig", "", "kubeconfig the stand-in reads and patches the workload Nodes with")
	serveFile := flag.String("serve-kubeconfig", "", "kubeconfig MachineService.Kubeconfig hands out (as Pods reach the workload API)")
	downFor := flag.Duration("down", 2*time.Second, "how long a rebooting node is away")
	var nodeFlags, bootOld, failOn repeated
	flag.Var(&nodeFlags, "node", "NAME=ADDRESS of a node this endpoint answers for (repeat; the first is the endpoint)")
	flag.Var(&bootOld, "boot-old", "NAME of a node that boots its previous version back after an upgrade (repeat)")
	flag.Var(&failOn, "fail-upgrade", "NAME of a node whose installer exits 1 (repeat)")
	flag.Parse()

	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		die("-listen %s: %v", *listen, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		die("-listen %s: only a loopback IP address (the tests forward the node's address to it)", *listen)
	}
	for name, value := range map[string]string{"-ca": *caFile, "-cert": *certFile, "-key": *keyFile, "-kubeconfig": *kubeconfigFile, "-serve-kubeconfig": *serveFile} {
		if value == "" {
			die("%s is required", name)
		}
	}
	if len(nodeFlags) == 0 {
		die("at least one -node NAME=ADDRESS")
	}
	caPEM, err := os.ReadFile(*caFile)
	if err != nil {
		die("%v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		die("-ca %s holds no certificate", *caFile)
	}
	serving, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		die("%v", err)
	}
	served, err := os.ReadFile(*serveFile)
	if err != nil {
		die("%v", err)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfigFile)
	if err != nil {
		die("-kubeconfig: %v", err)
	}
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		die("-kubeconfig: %v", err)
	}

	s := &server{
		nodes: map[string]*node{}, kube: kube, kubeconfig: served, downFor: *downFor,
		bootOld: map[string]bool{}, failOn: map[string]bool{},
	}
	for _, name := range bootOld {
		s.bootOld[name] = true
	}
	for _, name := range failOn {
		s.failOn[name] = true
	}
	for _, spec := range nodeFlags {
		name, address, ok := strings.Cut(spec, "=")
		if !ok || name == "" || address == "" {
			die("-node %q: NAME=ADDRESS", spec)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		found, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		cancel()
		if err != nil {
			die("-node %s: the workload Node cannot be read: %v", name, err)
		}
		match := osImage.FindStringSubmatch(found.Status.NodeInfo.OSImage)
		if match == nil {
			die("-node %s: osImage %q is not a Talos one (Talos (vX.Y.Z))", name, found.Status.NodeInfo.OSImage)
		}
		n := &node{
			name: name, address: address, version: match[1], pulled: map[string]bool{},
			bootID: found.Status.NodeInfo.BootID, listeners: map[chan *machine.Event]struct{}{},
		}
		if n.bootID == "" {
			n.bootID = bootID()
		}
		s.nodes[address] = n
		if s.endpoint == nil {
			s.endpoint = n
		}
	}

	listener, err := net.Listen("tcp", *listen)
	if err != nil {
		die("%v", err)
	}
	grpcServer := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{serving},
			ClientCAs:    pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS13,
		})),
		grpc.UnaryInterceptor(s.unary),
		grpc.StreamInterceptor(s.stream),
	)
	machine.RegisterMachineServiceServer(grpcServer, machineAPI{s: s})
	machine.RegisterImageServiceServer(grpcServer, imageAPI{s: s})
	machine.RegisterLifecycleServiceServer(grpcServer, lifecycleAPI{s: s})
	v1alpha1.RegisterStateServer(grpcServer, stateAPI{s: s})

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		stopped := make(chan struct{})
		go func() { grpcServer.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(3 * time.Second):
			grpcServer.Stop()
		}
	}()
	nodes := map[string]string{}
	for address, n := range s.nodes {
		nodes[n.name] = address + " " + n.version
	}
	s.log("listening", nil, map[string]any{"address": listener.Addr().String(), "nodes": nodes})
	if err := grpcServer.Serve(listener); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		die("%v", err)
	}
}
