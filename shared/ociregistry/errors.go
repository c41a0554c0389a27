package ociregistry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The kinds of failure a caller tells apart (errors.Is). An *Error wraps one of them, or none
// for any other answer of the registry.
var (
	// ErrNotFound: the registry has no such repository, tag, manifest or blob (404).
	ErrNotFound = errors.New("not found")
	// ErrUnauthorized: the registry refused the credentials, or asked for some and none were
	// given (401, 403, or a token endpoint that refused them).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrDigestMismatch: the content read does not hash to the digest asked for.
	ErrDigestMismatch = errors.New("digest mismatch")
	// ErrTooLarge: the content is larger than the limit the caller set.
	ErrTooLarge = errors.New("too large")
)

// Error is a failed registry operation: what was done, on what, and the registry's answer. It
// never carries credentials or tokens.
type Error struct {
	// Op is what was done ("pull manifest", "push blob", "resolve tag", ...).
	Op string
	// Ref is what it was done on (host/repository, with :tag or @digest).
	Ref string
	// Status is the HTTP status of the answer (0 when there was none).
	Status int
	// Code and Message are the registry's first error (the distribution spec's errors body).
	Code, Message string
	// Kind is ErrNotFound, ErrUnauthorized, ErrDigestMismatch, ErrTooLarge or nil.
	Kind error
	// Detail says more when the registry's body does not (a digest mismatch's digests, a limit).
	Detail string
	// Err is the transport error, when the request did not get an answer.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", e.Op, e.Ref)
	switch {
	case e.Err != nil:
		fmt.Fprintf(&b, ": %v", e.Err)
	case e.Status != 0:
		fmt.Fprintf(&b, ": registry answered %d %s", e.Status, http.StatusText(e.Status))
		if e.Code != "" || e.Message != "" {
			fmt.Fprintf(&b, " (%s)", strings.TrimSpace(e.Code+" "+e.Message))
		}
	}
	if e.Detail != "" {
		fmt.Fprintf(&b, ": %s", e.Detail)
	}
	return b.String()
}

// Unwrap gives Kind and the transport error to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// statusError turns a non-success answer into an *Error, reading the distribution spec's error
// body ({"errors":[{"code","message"}]}) when there is one.
func statusError(op, ref string, resp *http.Response) *Error {
	e := &Error{Op: op, Ref: ref, Status: resp.StatusCode}
	switch resp.StatusCode {
	case http.StatusNotFound:
		e.Kind = ErrNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		e.Kind = ErrUnauthorized
	case http.StatusRequestEntityTooLarge:
		e.Kind = ErrTooLarge
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var parsed struct {
		Errors []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &parsed) == nil && len(parsed.Errors) > 0 {
		e.Code, e.Message = parsed.Errors[0].Code, parsed.Errors[0].Message
		// some registries answer 404 with no body but others say why in a 400/401
		switch e.Code {
		case "MANIFEST_UNKNOWN", "BLOB_UNKNOWN", "NAME_UNKNOWN":
			e.Kind = ErrNotFound
		case "UNAUTHORIZED", "DENIED":
			e.Kind = ErrUnauthorized
		}
	}
	return e
}
