package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// command is one control line on stdin; its answer is a "control" line on stdout with
// the same id: {"call": "control", "id": ..., "ok": ..., "error": ..., "state": ...}.
//
//	{"id": 1, "op": "state"}                                      every node and the etcd cluster
//	{"id": 2, "op": "node", "node": NAME, "set": {nodeSettings}}   change what a node runs
//	{"id": 3, "op": "member", "node": NAME, "set": {memberSettings}} change its etcd member
type command struct {
	ID   int             `json:"id"`
	Op   string          `json:"op"`
	Node string          `json:"node"`
	Set  json.RawMessage `json:"set"`
}

// maxLine bounds a control line; a longer one is refused and the channel goes on.
const maxLine = 1 << 20

// control serves the control lines until stdin ends.
func (s *server) control(input io.Reader) {
	reader := bufio.NewReaderSize(input, 64<<10)
	for {
		raw, tooLong, err := readLine(reader)
		if err != nil {
			return
		}
		line := strings.TrimSpace(raw)
		if line == "" && !tooLong {
			continue
		}
		var c command
		var failure error
		if tooLong {
			failure = fmt.Errorf("control line longer than %d bytes", maxLine)
		} else if failure = json.Unmarshal([]byte(line), &c); failure == nil {
			failure = s.run(c)
		}
		fields := map[string]any{"id": c.ID, "op": c.Op, "ok": failure == nil, "state": s.state()}
		if c.Node != "" {
			fields["target"] = c.Node
		}
		if failure != nil {
			fields["error"] = failure.Error()
		}
		s.log("control", nil, fields)
	}
}

// readLine reads up to the next newline, keeping at most maxLine bytes of it.
func readLine(reader *bufio.Reader) (line string, tooLong bool, err error) {
	var kept []byte
	for {
		chunk, isPrefix, err := reader.ReadLine()
		if err != nil {
			return "", false, err
		}
		if len(kept)+len(chunk) > maxLine {
			tooLong = true
		} else {
			kept = append(kept, chunk...)
		}
		if !isPrefix {
			return string(kept), tooLong, nil
		}
	}
}

func (s *server) byName(name string) (*node, error) {
	for _, n := range s.order {
		if n.name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node %q (this stand-in serves %d nodes)", name, len(s.order))
}

func strict(raw json.RawMessage, into any) error {
	decoder := json.NewDecoder(strings.NewReader(string(raw)))
	decoder.DisallowUnknownFields()
	return decoder.Decode(into)
}

func (s *server) run(c command) error {
	switch c.Op {
	case "state":
		return nil
	case "node":
		n, err := s.byName(c.Node)
		if err != nil {
			return err
		}
		var settings nodeSettings
		if err := strict(c.Set, &settings); err != nil {
			return fmt.Errorf("set: %w", err)
		}
		if err := n.apply(settings); err != nil {
			return err
		}
		if err := n.sync(context.Background()); err != nil {
			return err
		}
		s.applyNodeMetadata(n)
		return nil
	case "member":
		if _, err := s.byName(c.Node); err != nil {
			return err
		}
		var settings memberSettings
		if err := strict(c.Set, &settings); err != nil {
			return fmt.Errorf("set: %w", err)
		}
		return s.etcd.set(c.Node, settings)
	default:
		return fmt.Errorf("op %q is not state, node or member", c.Op)
	}
}

func (s *server) state() map[string]any {
	nodes := map[string]any{}
	for _, n := range s.order {
		nodes[n.name] = n.view()
	}
	return map[string]any{"nodes": nodes, "etcd": s.etcd.view()}
}
