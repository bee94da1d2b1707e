package redistest

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// nodeEntry is one line of CLUSTER NODES:
//
//	<id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent> <pong-recv> <config-epoch> <link-state> <slot>...
type nodeEntry struct {
	id    string
	addr  string
	port  int // client port; 0 while the address is unknown
	flags string
	link  string
	slots [][2]int // inclusive ranges
}

// failing reports whether the entry is flagged fail or fail? (PFAIL).
func (e nodeEntry) failing() bool {
	for f := range strings.SplitSeq(e.flags, ",") {
		if f == "fail" || f == "fail?" {
			return true
		}
	}
	return false
}

// serves reports whether slot is in one of the entry's ranges.
func (e nodeEntry) serves(slot int) bool {
	for _, r := range e.slots {
		if r[0] <= slot && slot <= r[1] {
			return true
		}
	}
	return false
}

// clusterNodes asks the server for CLUSTER NODES and parses the reply.
func (s *Server) clusterNodes() ([]nodeEntry, error) {
	text, err := s.doTimeout(time.Second, "CLUSTER", "NODES")
	if err != nil {
		return nil, fmt.Errorf("%s: CLUSTER NODES: %w", s.Addr(), err)
	}
	return parseClusterNodes(text)
}

// parseClusterNodes parses the text of a CLUSTER NODES reply. Slots being
// imported or migrated ("[slot-<-id]", "[slot->-id]") are skipped.
func parseClusterNodes(text string) ([]nodeEntry, error) {
	var entries []nodeEntry
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("malformed CLUSTER NODES line %q", line)
		}
		e := nodeEntry{id: f[0], addr: f[1], flags: f[2], link: f[7]}
		hostport, _, _ := strings.Cut(f[1], "@")
		if i := strings.LastIndexByte(hostport, ':'); i >= 0 {
			e.port, _ = strconv.Atoi(hostport[i+1:])
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				continue
			}
			lo, hi, isRange := strings.Cut(s, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("malformed slot %q in CLUSTER NODES line %q", s, line)
			}
			e.slots = append(e.slots, [2]int{a, b})
		}
		entries = append(entries, e)
	}
	return entries, nil
}
