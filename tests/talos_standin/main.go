// Command talos-standin answers the Talos API for the tests as the apid of a Talos
// control plane node does, with its machined behind it for every node it is given: mutual
// TLS with the talosconfig's CA, the call routed by its gRPC metadata ("node" one node,
// "nodes" a fan-out whose per-node errors ride in the replies), roles from the client
// certificate, on the API types of the machinery module talosctl is built from (v1.13.9;
// the module proxy serves no v1.14.x). Per behaviour, the file of siderolabs/talos it
// follows is named where it is built. Per node it serves:
//
//   - MachineService.Version; ImageService.Pull (records the image, fetches nothing);
//     LifecycleService.Upgrade (stages the installer, counts the call, records the image);
//     Kubeconfig; Read of the boot ID; Reboot (the node goes away for -down, then boots
//     what was staged: version, and for an Image Factory installer its schematic,
//     platform and SecureBoot) and the Events `--wait` follows (machine.go);
//   - EtcdMemberList, EtcdStatus, EtcdAlarmList of one etcd cluster whose members are the
//     control plane nodes; a rebooting node's member goes away and comes back (etcd.go);
//   - COSI State Get/List/Watch (cosi.go, resources.go) of ExtensionStatus (the node's
//     extensions and the Image Factory's `schematic` meta-extension), PlatformMetadata,
//     SecurityState, ImageFactorySchematic (nodes on Talos 1.14+), MachineStatus,
//     MachineType and Nodename; a resource may be set missing (NotFound) or unsupported
//     (its type not registered, as on an older Talos);
//   - the Node's extensions.talos.dev/ labels and annotations, as Talos writes them.
//
// Everything else answers Unimplemented. Which role may call what is Talos's own table
// (authz.go); an expired or foreign client certificate fails the TLS handshake. Per-node
// settings come from -config and change at run time through JSON lines on stdin
// (control.go). Each call is logged as one JSON line on stdout ({"call": ..., "node":
// ...}); the first says where it listens, on a loopback address only.
package main

import (
	"context"
	stdtls "crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cosi-project/runtime/api/v1alpha1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
)

var osImage = regexp.MustCompile(`^Talos \((v[0-9]+\.[0-9]+\.[0-9]+[^)]*)\)$`)

type server struct {
	nodes      map[string]*node // by address
	order      []*node          // as given; the first is the endpoint
	endpoint   *node            // the node the talosconfig's endpoint is (the first -node)
	kube       kubernetes.Interface
	kubeconfig []byte // what MachineService.Kubeconfig hands out
	downFor    time.Duration
	bootOld    map[string]bool // nodes that boot their previous version back after an upgrade
	failOn     map[string]bool // nodes whose installer exits 1
	schematics map[string][]extension
	etcd       *etcdCluster
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

// fileConfig is -config: per node (by name) what it runs, and the extensions each
// schematic an installer may name carries (what a node boots after installing it).
type fileConfig struct {
	Nodes      map[string]nodeSettings `json:"nodes"`
	Schematics map[string][]extension  `json:"schematics"`
	EtcdRejoin string                  `json:"etcdRejoin"`
}

type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "talos-standin: "+format+"\n", args...)
	os.Exit(2)
}

// verifyExtKeyUsage is apid's own check (internal/app/apid/service.go): every non-CA
// certificate of the client's chain is for client authentication only.
func verifyExtKeyUsage(_ [][]byte, verifiedChains [][]*x509.Certificate) error {
	if len(verifiedChains) == 0 {
		return errors.New("no verified chains")
	}
	for _, cert := range verifiedChains[0] {
		if cert.IsCA {
			continue
		}
		if !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
			return fmt.Errorf("certificate %q is missing the client auth extended key usage", cert.Subject)
		}
	}
	return nil
}

// serverTLS is apid's server TLS configuration (internal/app/apid/pkg/provider/provider.go
// ServerConfig: github.com/siderolabs/crypto/tls New with Mutual client auth, its
// defaults TLS 1.3 and h2; then service.go's verifyExtKeyUsage). Written out rather than
// imported: the wrapper module talosctl is built in lacks the modules that package needs.
// Go's verification of the client's chain refuses an expired or foreign certificate in
// the handshake (an expired one with the "certificate expired" alert).
func serverTLS(caPEM []byte, serving stdtls.Certificate) *stdtls.Config {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		die("-ca holds no certificate")
	}
	return &stdtls.Config{
		Certificates:           []stdtls.Certificate{serving},
		ClientCAs:              pool,
		ClientAuth:             stdtls.RequireAndVerifyClientCert,
		SessionTicketsDisabled: true,
		MinVersion:             stdtls.VersionTLS13,
		NextProtos:             []string{"h2"},
		VerifyPeerCertificate:  verifyExtKeyUsage,
	}
}

// refusals logs each TLS handshake the server refuses (an expired or foreign client
// certificate: the client may only see the connection close).
type refusals struct {
	credentials.TransportCredentials
	s *server
}

func (r refusals) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := r.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		r.s.log("handshake-refused", nil, map[string]any{"remote": conn.RemoteAddr().String(), "error": err.Error()})
	}
	return out, info, err
}

func (r refusals) Clone() credentials.TransportCredentials {
	return refusals{TransportCredentials: r.TransportCredentials.Clone(), s: r.s}
}

func loadKeypair(certFile, keyFile string) stdtls.Certificate {
	pair, err := stdtls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		die("%v", err)
	}
	return pair
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "loopback address:port to serve on")
	caFile := flag.String("ca", "", "the talosconfig's CA (PEM): client certificates must chain to it")
	certFile := flag.String("cert", "", "serving certificate (PEM), naming the endpoint address")
	keyFile := flag.String("key", "", "serving key (PEM)")
	kubeconfigFile := flag.String("kubeconfig", "", "kubeconfig the stand-in reads and patches the workload Nodes with")
	serveFile := flag.String("serve-kubeconfig", "", "kubeconfig MachineService.Kubeconfig hands out (as Pods reach the workload API)")
	configFile := flag.String("config", "", "JSON: per node settings (platform, SecureBoot, schematic, extensions, ...) and the schematics' extensions")
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
	var cfg fileConfig
	if *configFile != "" {
		raw, err := os.ReadFile(*configFile)
		if err != nil {
			die("%v", err)
		}
		decoder := json.NewDecoder(strings.NewReader(string(raw)))
		decoder.DisallowUnknownFields()
		if err := decoder.Decode(&cfg); err != nil {
			die("-config %s: %v", *configFile, err)
		}
	}
	rejoin := time.Duration(0)
	if cfg.EtcdRejoin != "" {
		if rejoin, err = time.ParseDuration(cfg.EtcdRejoin); err != nil {
			die("-config etcdRejoin: %v", err)
		}
	}
	caPEM, err := os.ReadFile(*caFile)
	if err != nil {
		die("%v", err)
	}
	serving := serverTLS(caPEM, loadKeypair(*certFile, *keyFile))
	served, err := os.ReadFile(*serveFile)
	if err != nil {
		die("%v", err)
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", *kubeconfigFile)
	if err != nil {
		die("-kubeconfig: %v", err)
	}
	kube, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		die("-kubeconfig: %v", err)
	}

	s := &server{
		nodes: map[string]*node{}, kube: kube, kubeconfig: served, downFor: *downFor,
		bootOld: map[string]bool{}, failOn: map[string]bool{}, schematics: cfg.Schematics,
	}
	if s.schematics == nil {
		s.schematics = map[string][]extension{}
	}
	for _, name := range bootOld {
		s.bootOld[name] = true
	}
	for _, name := range failOn {
		s.failOn[name] = true
	}
	known := map[string]bool{}
	for _, spec := range nodeFlags {
		name, address, ok := strings.Cut(spec, "=")
		if !ok || name == "" || address == "" {
			die("-node %q: NAME=ADDRESS", spec)
		}
		known[name] = true
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
		_, controlPlane := found.Labels["node-role.kubernetes.io/control-plane"]
		n := newNode(name, address, match[1], found.Status.NodeInfo.BootID, controlPlane)
		if err := n.apply(cfg.Nodes[name]); err != nil {
			die("-config node %s: %v", name, err)
		}
		if _, taken := s.nodes[address]; taken {
			die("-node %s: address %s is given twice", name, address)
		}
		s.nodes[address] = n
		s.order = append(s.order, n)
		if s.endpoint == nil {
			s.endpoint = n
		}
	}
	for name := range cfg.Nodes {
		if !known[name] {
			die("-config names node %s, which no -node gives", name)
		}
	}
	s.etcd = newEtcdCluster(s.order, rejoin)
	for _, n := range s.order {
		if err := n.initState(context.Background()); err != nil {
			die("node %s: %v", n.name, err)
		}
		s.applyNodeMetadata(n)
	}

	listener, err := net.Listen("tcp", *listen)
	if err != nil {
		die("%v", err)
	}
	grpcServer := grpc.NewServer(
		grpc.Creds(refusals{TransportCredentials: credentials.NewTLS(serving), s: s}),
		grpc.UnaryInterceptor(s.unary),
		grpc.StreamInterceptor(s.stream),
	)
	machine.RegisterMachineServiceServer(grpcServer, machineAPI{s: s})
	machine.RegisterImageServiceServer(grpcServer, imageAPI{s: s})
	machine.RegisterLifecycleServiceServer(grpcServer, lifecycleAPI{s: s})
	v1alpha1.RegisterStateServer(grpcServer, stateAPI{s: s})

	stop := func() {
		stopped := make(chan struct{})
		go func() { grpcServer.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(3 * time.Second):
			grpcServer.Stop()
		}
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-signals; stop() }()
	// the control channel: when the driver's end of stdin closes, the stand-in stops
	go func() { s.control(os.Stdin); stop() }()

	nodes := map[string]string{}
	for address, n := range s.nodes {
		nodes[n.name] = address + " " + n.version
	}
	s.log("listening", nil, map[string]any{"address": listener.Addr().String(), "nodes": nodes})
	if err := grpcServer.Serve(listener); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		die("%v", err)
	}
}
