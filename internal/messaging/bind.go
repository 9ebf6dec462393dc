package messaging

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"

	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"
)

const nsBind = "urn:ietf:params:xml:ns:xmpp-bind"

// bindNamed is resource binding (RFC 6120 §7) that asks for a given
// resource. mellium v0.22.0's BindResource writes the JID instead of the
// resource into <resource/>, so the server always assigns a random one; a
// fixed resource lets a restarted agent replace its stale session at once.
func bindNamed(resource string) xmpp.StreamFeature {
	return xmpp.StreamFeature{
		Name:       xml.Name{Space: nsBind, Local: "bind"},
		Necessary:  xmpp.Authn,
		Prohibited: xmpp.Ready,
		Parse: func(ctx context.Context, d *xml.Decoder, start *xml.StartElement) (bool, interface{}, error) {
			parsed := struct {
				XMLName xml.Name `xml:"urn:ietf:params:xml:ns:xmpp-bind bind"`
			}{}
			return true, nil, d.DecodeElement(&parsed, start)
		},
		Negotiate: func(ctx context.Context, session *xmpp.Session, _ interface{}) (xmpp.SessionState, io.ReadWriter, error) {
			reqID := randomID(8)
			w := session.TokenWriter()
			defer w.Close()
			req := stanza.IQ{ID: reqID, Type: stanza.SetIQ}.Wrap(xmlstream.Wrap(
				xmlstream.Wrap(xmlstream.Token(xml.CharData(resource)), xml.StartElement{Name: xml.Name{Local: "resource"}}),
				xml.StartElement{Name: xml.Name{Space: nsBind, Local: "bind"}},
			))
			if _, err := xmlstream.Copy(w, req); err != nil {
				return 0, nil, fmt.Errorf("bind: write request: %w", err)
			}
			if err := w.Flush(); err != nil {
				return 0, nil, fmt.Errorf("bind: flush request: %w", err)
			}

			r := session.TokenReader()
			defer r.Close()
			d := xml.NewTokenDecoder(r)
			var resp struct {
				stanza.IQ
				Bind struct {
					JID string `xml:"jid"`
				} `xml:"urn:ietf:params:xml:ns:xmpp-bind bind"`
				Err *stanza.Error `xml:"error"`
			}
			for {
				tok, err := d.Token()
				if err != nil {
					return 0, nil, fmt.Errorf("bind: read response: %w", err)
				}
				start, ok := tok.(xml.StartElement)
				if !ok {
					continue
				}
				if start.Name.Local != "iq" {
					// Nothing else is expected before the bind result; skip it.
					if err := d.Skip(); err != nil {
						return 0, nil, fmt.Errorf("bind: skip %s: %w", start.Name.Local, err)
					}
					continue
				}
				if err := d.DecodeElement(&resp, &start); err != nil {
					return 0, nil, fmt.Errorf("bind: decode response: %w", err)
				}
				break
			}
			switch {
			case resp.ID != reqID:
				return 0, nil, fmt.Errorf("bind: response id %q does not match request %q", resp.ID, reqID)
			case resp.Type == stanza.ErrorIQ && resp.Err != nil:
				return 0, nil, fmt.Errorf("bind resource %q: %w", resource, *resp.Err)
			case resp.Type != stanza.ResultIQ:
				return 0, nil, fmt.Errorf("bind: unexpected response type %q", resp.Type)
			}
			j, err := jid.Parse(resp.Bind.JID)
			if err != nil {
				return 0, nil, fmt.Errorf("bind: server returned invalid JID %q: %w", resp.Bind.JID, err)
			}
			session.UpdateAddr(j)
			return xmpp.Ready, nil, nil
		},
	}
}
