package bus

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Parking: a message whose handler keeps failing is not redelivered forever. After ParkAfter
// failed handlings the dispatch loop that holds it copies it, with why and from where, to the
// parked stream (a dead-letter stream) and takes it off its consumer. The planner reads that
// stream, shows what it holds on the ClusterRuntime (MessagesParked) and, when a person asks
// (AnnotationRetryParked), sends each parked message back to where it came from.
const (
	// StreamParked holds the parked messages, each until it is retried or ParkedMaxAge passed.
	StreamParked = "AICR_PARKED"
	// SubjectParked matches every parked message (the parked stream): aicr.v1.parked.<consumer>.
	SubjectParked = Prefix + ".parked.>"
	// ParkedMaxAge is how long a parked message is kept when nobody retries it.
	ParkedMaxAge = 14 * 24 * time.Hour
	// ParkedMaxMsgs bounds the parked stream; the oldest go first.
	ParkedMaxMsgs = 10000

	// ParkAfter is how many failed handlings (an error that is neither NotYet nor Terminal, or
	// a panic) park a message: with Backoff between them about 1.5 minutes of failing.
	ParkAfter = 10
	// ParkedErrorMax bounds the error kept with a parked message, in bytes.
	ParkedErrorMax = 1024
)

// The headers of a parked message; its data is the original message's, unchanged. The
// original's other headers are kept as they were, but for its Nats-Msg-Id, which moves to
// HeaderParkedMsgID (the parked copy has its own, ParkedMsgID).
const (
	HeaderParkedSubject  = "Aicr-Parked-Subject"
	HeaderParkedStream   = "Aicr-Parked-Stream"
	HeaderParkedSequence = "Aicr-Parked-Sequence"
	HeaderParkedConsumer = "Aicr-Parked-Consumer"
	HeaderParkedFailures = "Aicr-Parked-Failures"
	HeaderParkedError    = "Aicr-Parked-Error"
	HeaderParkedMsgID    = "Aicr-Parked-Msg-Id"
)

// ParkedSubject is where the dispatch loop of consumer parks a message.
func ParkedSubject(consumer string) string { return Prefix + ".parked." + token(consumer) }

// ParkedMsgID is the message ID of the parked copy of a stream's message: parking it twice
// (the copy stored, the acknowledgement of the original lost) stores it once.
func ParkedMsgID(stream string, seq uint64) string {
	return "parked/" + stream + "/" + strconv.FormatUint(seq, 10)
}

// RetryMsgID is the message ID a retried message is sent back with: the original's ID would
// be dropped as a duplicate within DuplicateWindow, and a retry sent twice (the planner
// stopped between sending it and removing the parked copy) is stored once.
func RetryMsgID(originalID string, parkedSeq uint64) string {
	return originalID + "/retry/" + strconv.FormatUint(parkedSeq, 10)
}

// Parked is one parked message as the parked stream holds it.
type Parked struct {
	// Seq is its sequence in the parked stream.
	Seq uint64
	// Subject, Stream and Sequence say where it came from; Consumer which dispatch loop gave up.
	Subject, Stream, Consumer string
	Sequence                  uint64
	// Failures is how many handlings failed; Error is the last one's error.
	Failures int
	Error    string
	// MsgID is the original's Nats-Msg-Id.
	MsgID string
	// Data is the original message.
	Data []byte
	// Header holds the original's other headers.
	Header nats.Header
}

// ParkedState is what the parked stream holds: how many messages, and the oldest of them.
type ParkedState struct {
	// Total is how many messages the parked stream holds.
	Total uint64
	// Oldest are the oldest of them, up to the number asked for, oldest first.
	Oldest []*Parked
}

// ParkMsg returns the message that parks msg (from stream at sequence seq, which consumer's
// handler failed failures times, the last with err) on ParkedSubject(consumer).
func ParkMsg(consumer, stream string, seq uint64, subject string, header nats.Header, data []byte, failures int, err error) *nats.Msg {
	out := &nats.Msg{Subject: ParkedSubject(consumer), Data: data, Header: nats.Header{}}
	for k, v := range header {
		if k == jetstream.MsgIDHeader {
			out.Header[HeaderParkedMsgID] = v
			continue
		}
		out.Header[k] = v
	}
	out.Header.Set(jetstream.MsgIDHeader, ParkedMsgID(stream, seq))
	out.Header.Set(HeaderParkedSubject, subject)
	out.Header.Set(HeaderParkedStream, stream)
	out.Header.Set(HeaderParkedSequence, strconv.FormatUint(seq, 10))
	out.Header.Set(HeaderParkedConsumer, consumer)
	out.Header.Set(HeaderParkedFailures, strconv.Itoa(failures))
	out.Header.Set(HeaderParkedError, oneLine(err.Error(), ParkedErrorMax))
	return out
}

// ParkedFrom reads a message of the parked stream (its sequence seq there).
func ParkedFrom(seq uint64, header nats.Header, data []byte) (*Parked, error) {
	p := &Parked{Seq: seq, Data: data, Header: nats.Header{},
		Subject: header.Get(HeaderParkedSubject), Stream: header.Get(HeaderParkedStream),
		Consumer: header.Get(HeaderParkedConsumer), Error: header.Get(HeaderParkedError),
		MsgID: header.Get(HeaderParkedMsgID)}
	if p.Subject == "" || p.Stream == "" {
		return nil, fmt.Errorf("parked message %d: no %s or %s header", seq, HeaderParkedSubject, HeaderParkedStream)
	}
	var err error
	if p.Sequence, err = strconv.ParseUint(header.Get(HeaderParkedSequence), 10, 64); err != nil {
		return nil, fmt.Errorf("parked message %d: header %s: %w", seq, HeaderParkedSequence, err)
	}
	if p.Failures, err = strconv.Atoi(header.Get(HeaderParkedFailures)); err != nil {
		return nil, fmt.Errorf("parked message %d: header %s: %w", seq, HeaderParkedFailures, err)
	}
	for k, v := range header {
		if !strings.HasPrefix(k, "Aicr-Parked-") && k != jetstream.MsgIDHeader {
			p.Header[k] = v
		}
	}
	return p, nil
}

// RetryMsg is the message that sends p back to its subject: the original's data and headers,
// with RetryMsgID.
func (p *Parked) RetryMsg() *nats.Msg {
	out := &nats.Msg{Subject: p.Subject, Data: p.Data, Header: nats.Header{}}
	for k, v := range p.Header {
		out.Header[k] = v
	}
	out.Header.Set(jetstream.MsgIDHeader, RetryMsgID(p.MsgID, p.Seq))
	return out
}

// oneLine keeps an error on one header line (no CR or LF) of at most limit bytes.
func oneLine(s string, limit int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > limit {
		s = strings.ToValidUTF8(s[:limit-3], "") + "..."
	}
	return s
}
