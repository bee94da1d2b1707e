package ratelimit

// logKind names a kind of log line that is throttled on its own (see
// internal/logthrottle): Options.LogInterval apart at least.
type logKind int

const (
	logOutage logKind = iota
	logAuth
	logMisuse
	logConnect
	logOpen
	logHalfOpen
	logClosed
	logWriteBack
	logHeartbeat
	logWatch
	logKinds
)
