package testenv

import "github.com/aicr-run/aicr-operator/testkit/freeport"

// FreePort returns a TCP port that is free on 127.0.0.1 right now, outside the kernel's
// ephemeral range and never handed out before in this process (package freeport says why).
// Between this call and the server binding it another process may take it; Start retries when
// a server reports "address already in use".
func FreePort() (int, error) { return freeport.Loopback() }

// freePortAllInterfaces is FreePort for servers that bind every interface (Argo CD's
// application-controller metrics port has no address flag).
func freePortAllInterfaces() (int, error) { return freeport.AllInterfaces() }

// FreePorts returns n distinct free loopback ports (FreePort n times).
func FreePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	return ports, nil
}
