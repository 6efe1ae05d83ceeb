// pause: the node's Pod sandbox image. It holds a Pod's namespaces and does nothing:
// it sleeps until told to stop and reaps any child handed to it (as PID 1 of a Pod that
// shares its process namespace). A static binary in a FROM-scratch image, built by
// hack/testenv/pause.sh; no image is pulled from outside.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
