package handlers

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/registry"
)

// fileNameRE is what a stored file name may look like once it is known
// not to be a path.
var fileNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9 ._+()-]{0,199}$`)

// checkFileName refuses a client's file name that is a path, hides
// itself, or holds characters a file name should not.
func checkFileName(name string) (string, *api.Problem) {
	bad := func(msg string) (string, *api.Problem) {
		return "", &api.Problem{Field: "file", Type: httpapi.FieldInvalid, Message: fmt.Sprintf("Invalid value: file name %q: %s", name, msg)}
	}
	switch {
	case name == "":
		return bad("the file part needs a file name (Content-Disposition: form-data; name=\"file\"; filename=\"model.onnx\")")
	case strings.ContainsAny(name, "/\\"):
		return bad("a file name, not a path: no / or \\")
	case name == "." || name == ".." || strings.Contains(name, ".."):
		return bad("no ..")
	case !api.CleanString(name):
		return bad("no control characters")
	case !fileNameRE.MatchString(name):
		return bad("1 to 200 letters, digits, spaces and . _ + ( ) -, starting with a letter or digit")
	}
	return name, nil
}

// uploadFile stores a file of a model: POST /v1/models/{id}/files and
// upstream's POST /model/{id}/upload, multipart/form-data with the parts
// file (the content) and file_kind (model, data, code or env), and
// optionally format. A model file makes a new version. 201 with the file
// (upstream's FileSchema fields) and the version.
func (a *API) uploadFile(w http.ResponseWriter, r *http.Request) error {
	mt, ok := httpapi.ParseMediaType(r.Header.Get("Content-Type"))
	if !ok || mt.Type != "multipart/form-data" || mt.Params["boundary"] == "" {
		return httpapi.NewError(http.StatusUnsupportedMediaType, httpapi.ProblemMediaType,
			"send multipart/form-data with the parts file and file_kind (curl -F file=@model.onnx -F file_kind=model)")
	}
	if enc := r.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return httpapi.NewError(http.StatusUnsupportedMediaType, httpapi.ProblemMediaType, "Content-Encoding %q is not supported", enc)
	}
	// The form's fields and headers are small; the file is bounded by
	// MaxUploadBytes.
	limit := a.cfg.MaxUploadBytes + 64<<10
	if r.ContentLength > limit {
		return httpapi.TooLarge(a.cfg.MaxUploadBytes)
	}
	modelID := chi.URLParam(r, "model_id")
	if _, err := a.cfg.Registry.Model(r.Context(), modelID); err != nil {
		return classify(err)
	}
	mr := multipart.NewReader(http.MaxBytesReader(w, r.Body, limit), mt.Params["boundary"])
	var (
		problems           []api.Problem
		kind, format, name string
		contentType        string
		tmp                *os.File
		size               int64
		seenFile           bool
	)
	defer func() {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	tooLarge := func(err error) bool {
		var mbe *http.MaxBytesError
		return errors.As(err, &mbe)
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			if tooLarge(err) {
				return httpapi.TooLarge(a.cfg.MaxUploadBytes)
			}
			return httpapi.BadRequest("the multipart body is malformed: %v", err)
		}
		field := part.FormName()
		switch field {
		case "file":
			if seenFile {
				problems = append(problems, api.Problem{Field: "file", Type: httpapi.FieldDuplicate, Message: "Duplicate value: send one file per upload"})
				continue
			}
			seenFile = true
			name = rawFileName(part)
			if n, p := checkFileName(name); p != nil {
				problems = append(problems, *p)
			} else {
				name = n
			}
			contentType = part.Header.Get("Content-Type")
			if ct, ok := httpapi.ParseMediaType(contentType); !ok || len(contentType) > 200 {
				contentType = "application/octet-stream"
			} else if ct.Type == "" {
				contentType = "application/octet-stream"
			}
			if tmp, err = os.CreateTemp(a.cfg.UploadDir, "upload-*"); err != nil {
				return fmt.Errorf("upload spool: %w", err)
			}
			size, err = io.Copy(tmp, io.LimitReader(part, a.cfg.MaxUploadBytes+1))
			if err != nil {
				if tooLarge(err) {
					return httpapi.TooLarge(a.cfg.MaxUploadBytes)
				}
				return httpapi.BadRequest("the file part could not be read: %v", err)
			}
			if size > a.cfg.MaxUploadBytes {
				return httpapi.TooLarge(a.cfg.MaxUploadBytes)
			}
		case "file_kind", "format":
			b, err := io.ReadAll(io.LimitReader(part, 257))
			if err != nil {
				if tooLarge(err) {
					return httpapi.TooLarge(a.cfg.MaxUploadBytes)
				}
				return httpapi.BadRequest("the %s part could not be read: %v", field, err)
			}
			if field == "file_kind" {
				kind = strings.TrimSpace(string(b))
			} else {
				format = strings.TrimSpace(string(b))
			}
		default:
			problems = append(problems, api.Problem{Field: field, Type: httpapi.FieldNotSupported,
				Message: "Unsupported value: unknown part; send file, file_kind and optionally format"})
			_, _ = io.Copy(io.Discard, io.LimitReader(part, 1<<20))
		}
	}
	if !seenFile {
		problems = append(problems, api.Problem{Field: "file", Type: httpapi.FieldRequired, Message: "Required value: the file part"})
	}
	switch {
	case kind == "":
		problems = append(problems, api.Problem{Field: "file_kind", Type: httpapi.FieldRequired, Message: "Required value: model, data, code or env"})
	case !validKind(kind):
		problems = append(problems, api.Problem{Field: "file_kind", Type: httpapi.FieldNotSupported,
			Message: fmt.Sprintf("Unsupported value: %q: supported values: %s", kind, strings.Join(api.FileKinds, ", "))})
	}
	if format != "" {
		spec := api.ModelSpec{ModelName: "x", ModelKind: "x", Format: format}
		for _, p := range spec.Validate() {
			problems = append(problems, p)
		}
	}
	if seenFile && size == 0 && len(problems) == 0 {
		problems = append(problems, api.Problem{Field: "file", Type: httpapi.FieldInvalid, Message: "Invalid value: the file is empty"})
	}
	if len(problems) > 0 {
		return invalidBody("upload", problems)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	up, err := a.cfg.Registry.Upload(r.Context(), registry.UploadRequest{
		ModelID: modelID, Kind: kind, FileName: name, ContentType: contentType, Format: format,
		Body: tmp, Size: size, By: caller(r),
	})
	if err != nil {
		return classify(err)
	}
	w.Header().Set("Location", api.ModelPath(modelID)+"/files/"+up.ID)
	httpapi.WriteJSON(w, http.StatusCreated, up)
	return nil
}

// rawFileName is the filename of a part's Content-Disposition as sent:
// mime/multipart's FileName strips directories, which would hide a path.
func rawFileName(p *multipart.Part) string {
	_, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

func validKind(k string) bool {
	for _, x := range api.FileKinds {
		if k == x {
			return true
		}
	}
	return false
}

func (a *API) listFiles(w http.ResponseWriter, r *http.Request) error {
	list, err := a.cfg.Registry.Artifacts(r.Context(), chi.URLParam(r, "model_id"))
	if err != nil {
		return classify(err)
	}
	if list == nil {
		list = []api.Artifact{}
	}
	httpapi.WriteJSON(w, http.StatusOK, api.Page[api.Artifact]{Items: list})
	return nil
}

func (a *API) getFile(w http.ResponseWriter, r *http.Request) error {
	f, err := a.cfg.Registry.Artifact(r.Context(), chi.URLParam(r, "model_id"), chi.URLParam(r, "file_id"))
	if err != nil {
		return classify(err)
	}
	httpapi.WriteJSON(w, http.StatusOK, f)
	return nil
}

// downloadFile streams a file's content with its checksum.
func (a *API) downloadFile(w http.ResponseWriter, r *http.Request) error {
	return a.stream(w, r, chi.URLParam(r, "model_id"), chi.URLParam(r, "file_id"))
}

func (a *API) stream(w http.ResponseWriter, r *http.Request, modelID, fileID string) error {
	rc, f, err := a.cfg.Registry.Open(r.Context(), modelID, fileID)
	if err != nil {
		return classify(err)
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(f.Size, 10))
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": f.FileName}))
	w.Header().Set("X-Checksum-Sha256", f.SHA256)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if _, err := io.Copy(w, rc); err != nil {
		// The status is sent; the client sees a short body.
		a.log.Warn("download cut short", "model", modelID, "file", fileID, "err", err)
	}
	return nil
}

func (a *API) listVersions(w http.ResponseWriter, r *http.Request) error {
	list, err := a.cfg.Registry.Versions(r.Context(), chi.URLParam(r, "model_id"))
	if err != nil {
		return classify(err)
	}
	if list == nil {
		list = []api.Version{}
	}
	httpapi.WriteJSON(w, http.StatusOK, api.Page[api.Version]{Items: list})
	return nil
}

// getVersion resolves a version number, an alias or "latest".
func (a *API) getVersion(w http.ResponseWriter, r *http.Request) error {
	ref := chi.URLParam(r, "version")
	if !validRef(ref) {
		return httpapi.NotFound("model %s has no version %q", chi.URLParam(r, "model_id"), ref)
	}
	v, err := a.cfg.Registry.Resolve(r.Context(), chi.URLParam(r, "model_id"), ref)
	if err != nil {
		return classify(err)
	}
	httpapi.WriteJSON(w, http.StatusOK, v)
	return nil
}

// validRef reports whether ref can name a version: a positive number, or
// an alias name.
func validRef(ref string) bool {
	if n, err := strconv.Atoi(ref); err == nil {
		return n > 0
	}
	return ref == "latest" || api.ValidAlias(ref)
}

func (a *API) setAlias(w http.ResponseWriter, r *http.Request) error {
	alias := chi.URLParam(r, "alias")
	var req api.AliasRequest
	if err := a.readJSON(r, &req); err != nil {
		return err
	}
	var problems []api.Problem
	if !api.ValidAlias(alias) {
		problems = append(problems, api.Problem{Field: "alias", Type: httpapi.FieldInvalid,
			Message: fmt.Sprintf("Invalid value: %q: an alias is 1 to 64 letters, digits, '.', '_' or '-', not a number and not \"latest\"", alias)})
	}
	if req.Version < 1 {
		problems = append(problems, api.Problem{Field: "version", Type: httpapi.FieldInvalid, Message: "Invalid value: a version number, 1 or more"})
	}
	if len(problems) > 0 {
		return invalidBody("alias", problems)
	}
	modelID := chi.URLParam(r, "model_id")
	if err := a.cfg.Registry.SetAlias(r.Context(), modelID, alias, req.Version); err != nil {
		return classify(err)
	}
	v, err := a.cfg.Registry.Resolve(r.Context(), modelID, alias)
	if err != nil {
		return classify(err)
	}
	httpapi.WriteJSON(w, http.StatusOK, v)
	return nil
}

func (a *API) deleteAlias(w http.ResponseWriter, r *http.Request) error {
	modelID, alias := chi.URLParam(r, "model_id"), chi.URLParam(r, "alias")
	if _, err := a.cfg.Registry.Model(r.Context(), modelID); err != nil {
		return classify(err)
	}
	if err := a.cfg.Registry.DeleteAlias(r.Context(), modelID, alias); err != nil {
		return classify(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
