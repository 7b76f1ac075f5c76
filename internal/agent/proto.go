package agent

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Protocol is the protocol version the hello event announces. It changes only for a change an
// existing client would misread; additions keep it.
const Protocol = 1

// The error codes of docs/agent.md, "Errors".
const (
	codeBadJSON          = "bad-json"
	codeLineTooLong      = "line-too-long"
	codeUnknownOp        = "unknown-op"
	codeBadRequest       = "bad-request"
	codeFDMismatch       = "fd-mismatch"
	codeNoSuchChild      = "no-such-child"
	codeNoSuchFifo       = "no-such-fifo"
	codeNotFound         = "not-found"
	codePermissionDenied = "permission-denied"
	codeLedgerLocked     = "ledger-locked"
	codeGrantRefused     = "grant-refused"
	codeUnsupported      = "unsupported"
	codeStartFailed      = "start-failed"
	codeRunning          = "running"
	codeBusy             = "busy"
)

// replyError is a request's failure as the reply carries it.
type replyError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *replyError) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, a ...any) *replyError {
	return &replyError{Code: code, Message: fmt.Sprintf(format, a...)}
}

// request is the part of every request the server reads before it knows the op.
type request struct {
	id  json.RawMessage // the client's id, or null when it sent none usable
	op  string
	raw []byte // the whole line, decoded again into the op's own fields
}

// parseRequest reads a line's id and op. A line that is not a JSON object is bad-json; an id
// that is neither a number nor a string is answered as null.
func parseRequest(line []byte) (request, *replyError) {
	var head map[string]json.RawMessage
	if err := json.Unmarshal(line, &head); err != nil || head == nil {
		return request{id: null}, errorf(codeBadJSON, "the line is not a JSON object")
	}
	r := request{id: null, raw: line}
	if id, ok := head["id"]; ok && len(id) > 0 && (id[0] == '"' || id[0] == '-' || id[0] >= '0' && id[0] <= '9') {
		r.id = id
	}
	if op, ok := head["op"]; ok {
		if err := json.Unmarshal(op, &r.op); err != nil {
			return r, errorf(codeUnknownOp, "op is not a string")
		}
	}
	if r.op == "" {
		return r, errorf(codeUnknownOp, "the request has no op")
	}
	return r, nil
}

var null = json.RawMessage("null")

// decode decodes the request's fields into v, naming the field of a wrong type.
func (r request) decode(v any) *replyError {
	if err := json.Unmarshal(r.raw, v); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return errorf(codeBadRequest, "%s: want %s, got %s", te.Field, te.Type, te.Value)
		}
		return errorf(codeBadRequest, "%v", err)
	}
	return nil
}

// encodeReply encodes a success reply: id and ok first, then the result's fields (a struct or a
// map, encoded as an object), so that a person reading the stream sees what answers what.
func encodeReply(id json.RawMessage, result any) []byte {
	return splice(fmt.Appendf(nil, `{"id":%s,"ok":true`, id), result)
}

// encodeFailure encodes an error reply.
func encodeFailure(id json.RawMessage, e *replyError) []byte {
	b, _ := json.Marshal(struct {
		ID    json.RawMessage `json:"id"`
		OK    bool            `json:"ok"`
		Error *replyError     `json:"error"`
	}{id, false, e})
	return append(b, '\n')
}

// encodeEvent encodes an event: its name first, then its fields.
func encodeEvent(name string, fields any) []byte {
	return splice(fmt.Appendf(nil, `{"event":%q`, name), fields)
}

// splice ends head, an object's opening and first fields, with the fields of body and a newline.
func splice(head []byte, body any) []byte {
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil { // the server's own values: a bug, said as such rather than sent broken
			b = fmt.Appendf(nil, `{"internal_error":%q}`, err.Error())
		}
		if len(b) > 2 {
			head = append(append(head, ','), b[1:len(b)-1]...)
		}
	}
	return append(head, '}', '\n')
}
