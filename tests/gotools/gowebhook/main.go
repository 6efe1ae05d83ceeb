// Command gowebhook is a minimal validating admission webhook for TalosCluster writes,
// on controller-runtime's webhook server and admission package, as a Go operator would
// serve it. It is a test tool, not part of Ichor: the benchmark registers it on the test
// API server beside Ichor's webhook, and the differential test holds its verdicts equal to
// Ichor's decision function.
//
// It decides the TalosCluster write rule for a user without the override verb: the form
// of each version field the write sets, no downgrade, the Talos/Kubernetes pair (with the
// "unknown version" refusal), when Kubernetes moves on a cluster managed before or after
// the write whose status shows a Cilium, the Cilium/Kubernetes pair, and for a write that
// changes the preset while a Cilium is observed, CniPreset (releasing it) and the Cilium
// pair of the Kubernetes the cluster runs. The rows come from the JSON export of
// ichor.release.compat (-table, tests/gotools/compat.json), never from this file. It
// grants no override (it sends no SubjectAccessReview) and writes no Event; its sentences
// are its own, the rule name in each denial is Ichor's.
//
//	gowebhook -listen 127.0.0.1:PORT -cert tls.crt -key tls.key -table compat.json \
//	    [-client-ca ca.crt [-client-name NAME]] [-http2]
//
// It serves HTTPS on a loopback address only, at /taloscluster, and prints one JSON line
// on stdout once it accepts connections: {"listening":"127.0.0.1:PORT","path":"/taloscluster"}.
// SIGTERM or SIGINT stops it. HTTP/2 is off unless -http2 (kubebuilder's scaffold turns it
// off too); -client-ca requires the caller's client certificate (mutual TLS), and
// -client-name its common name, as Ichor's webhook checks the API server's.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/go-logr/logr/funcr"
	admissionv1 "k8s.io/api/admission/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Path is where the TalosCluster rule is served.
const Path = "/taloscluster"

type handler struct{ table *table }

func (h handler) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("operation %q is not validated here", req.Operation))
	}
	if req.UserInfo.Username == "" {
		return admission.Errored(http.StatusBadRequest, errors.New("request.userInfo.username is empty"))
	}
	c, err := decodeCluster(req.Object.Raw, "object")
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var old *cluster
	if req.Operation == admissionv1.Update {
		if old, err = decodeCluster(req.OldObject.Raw, "oldObject"); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	if r := h.table.review(c, old); r != nil {
		return admission.Denied(fmt.Sprintf("TalosCluster %s/%s is refused (rule %s): %s", req.Namespace, req.Name, r.rule, r.message))
	}
	return admission.Allowed("")
}

func decodeCluster(raw []byte, where string) (*cluster, error) {
	body, err := parseObject(raw)
	if err != nil {
		return nil, err
	}
	return readCluster(body, where)
}

func main() {
	listen := flag.String("listen", "", "loopback address host:port to serve on (port not 0)")
	cert := flag.String("cert", "", "PEM serving certificate")
	key := flag.String("key", "", "PEM private key of the serving certificate")
	tablePath := flag.String("table", "", "the JSON export of ichor.release.compat (tests/gotools/compat.json)")
	clientCA := flag.String("client-ca", "", "PEM CA the caller's client certificate must chain to (mutual TLS)")
	clientName := flag.String("client-name", "", "common name the client certificate must carry (with -client-ca)")
	http2 := flag.Bool("http2", false, "offer HTTP/2 (off, as kubebuilder's scaffold has it)")
	flag.Parse()
	if err := run(*listen, *cert, *key, *tablePath, *clientCA, *clientName, *http2); err != nil {
		fmt.Fprintf(os.Stderr, "gowebhook: %v\n", err)
		os.Exit(1)
	}
}

func run(listen, cert, key, tablePath, clientCA, clientName string, http2 bool) error {
	host, port, err := loopback(listen)
	if err != nil {
		return err
	}
	if cert == "" || key == "" || tablePath == "" {
		return errors.New("-cert, -key and -table are required")
	}
	if clientName != "" && clientCA == "" {
		return errors.New("-client-name needs -client-ca")
	}
	t, err := loadTable(tablePath)
	if err != nil {
		return err
	}
	ctrllog.SetLogger(funcr.New(func(prefix, args string) {
		fmt.Fprintln(os.Stderr, prefix, args)
	}, funcr.Options{Verbosity: 0}))

	certDir := filepath.Dir(cert)
	keyName, err := filepath.Rel(certDir, key)
	if err != nil {
		return err
	}
	tlsOpts, err := clientAuth(clientCA, clientName)
	if err != nil {
		return err
	}
	if !http2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	server := webhook.NewServer(webhook.Options{
		Host:     host,
		Port:     port,
		CertDir:  certDir,
		CertName: filepath.Base(cert),
		KeyName:  keyName,
		TLSOpts:  tlsOpts,
	})
	server.Register(Path, &webhook.Admission{Handler: handler{table: t}})

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- server.Start(ctx) }()
	address := net.JoinHostPort(host, strconv.Itoa(port))
	if err := ready(address, done); err != nil {
		return err
	}
	line, _ := json.Marshal(map[string]string{"listening": address, "path": Path})
	fmt.Println(string(line))
	return <-done
}

// loopback splits host:port and refuses any host but a loopback IP and port 0 (the
// server's own default port would be taken instead).
func loopback(listen string) (string, int, error) {
	host, portText, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("-listen %q: %v", listen, err)
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return "", 0, fmt.Errorf("-listen %q: only a loopback IP address is served", listen)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("-listen %q: the port must be a number from 1 to 65535", listen)
	}
	return host, port, nil
}

func clientAuth(caPath, name string) ([]func(*tls.Config), error) {
	if caPath == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caPath)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caPath)
	}
	return []func(*tls.Config){func(c *tls.Config) {
		c.ClientCAs = pool
		c.ClientAuth = tls.RequireAndVerifyClientCert
		if name != "" {
			c.VerifyPeerCertificate = func(_ [][]byte, chains [][]*x509.Certificate) error {
				if len(chains) == 0 || chains[0][0].Subject.CommonName != name {
					return fmt.Errorf("the client certificate is not %q's", name)
				}
				return nil
			}
		}
	}}, nil
}

// ready waits (bounded) until the listener accepts TCP connections, or the server failed.
func ready(address string, done <-chan error) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			if err == nil {
				err = errors.New("the server stopped before it served")
			}
			return err
		default:
		}
		if conn, err := net.DialTimeout("tcp", address, 200*time.Millisecond); err == nil {
			conn.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not listening on %s after 10 s", address)
}
