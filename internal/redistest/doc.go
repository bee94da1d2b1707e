// Package redistest starts real redis-server processes, small Redis Clusters
// (three masters), Sentinel setups (a master, a replica and three
// sentinels) and a fault-injecting TCP proxy for tests.
//
// Every server listens on a free port of 127.0.0.1 chosen at start, keeps its
// files in a directory of its own under t.TempDir, and is killed by pid when
// the test ends. Nothing here ever touches a Redis that is already running on
// the machine, such as one on the default port 6379.
//
// The package has no dependencies beyond the standard library: it speaks
// just enough RESP to send a command and read one reply.
package redistest
