// Package output is the -o flag of the reading commands, as kubectl has it: json, yaml, name,
// jsonpath=..., jsonpath-file=..., jsonpath-as-json=..., go-template=..., go-template-file=...
// (cli-runtime's printers), the command's own text by default, and formats a command adds (dot,
// mermaid).
package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"
)

// Text is the default format: the command's own rendering for people.
const Text = "text"

// Doc is what a command can print.
type Doc struct {
	// Object is printed by json, yaml and the templates: an object read from the API server
	// (apiVersion and kind set), a list of them, or any value that encodes to JSON.
	Object any
	// Names are the lines of -o name, such as "runtimerollout.operator.aicr.run/r-1".
	Names []string
	// Text renders the default format.
	Text func(io.Writer) error
	// Formats renders the command's own further formats (dot, mermaid).
	Formats map[string]func(io.Writer) error
}

// Flags are -o/--output and the template flags.
type Flags struct {
	// Format is the -o value.
	Format string
	// ShowManagedFields keeps metadata.managedFields in json and yaml.
	ShowManagedFields bool

	templates *genericclioptions.KubeTemplatePrintFlags
	extra     []string
}

// NewFlags returns the flags with the default text format and the command's further formats.
func NewFlags(extra ...string) *Flags {
	return &Flags{Format: Text, templates: genericclioptions.NewKubeTemplatePrintFlags(), extra: extra}
}

// Formats lists the accepted -o values.
func (f *Flags) Formats() []string {
	out := []string{Text, "json", "yaml", "name"}
	out = append(out, f.extra...)
	for _, t := range []string{"jsonpath", "jsonpath-file", "jsonpath-as-json", "go-template", "go-template-file"} {
		out = append(out, t+"=...")
	}
	return out
}

// AddFlags binds -o, --template, --allow-missing-template-keys and --show-managed-fields.
func (f *Flags) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.Format, "output", "o", f.Format, fmt.Sprintf("Output format. One of: (%s).", strings.Join(f.Formats(), ", ")))
	f.templates.AddFlags(cmd)
	cmd.Flags().BoolVar(&f.ShowManagedFields, "show-managed-fields", false, "If true, keep the managedFields when printing objects in JSON or YAML format.")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		var out []string
		for _, s := range f.Formats() {
			out = append(out, strings.TrimSuffix(s, "..."))
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	})
}

// IsText says whether the default text format is selected.
func (f *Flags) IsText() bool { return f.format() == Text }

// Is says whether format is selected.
func (f *Flags) Is(format string) bool { return f.format() == format }

func (f *Flags) format() string {
	switch {
	case (f.Format == "" || f.Format == Text) && *f.templates.TemplateArgument != "":
		// --template without -o is a go-template, as in kubectl.
		return "go-template"
	case f.Format == "":
		return Text
	}
	return f.Format
}

// Validate checks -o before anything is read, naming the flag and the accepted values.
func (f *Flags) Validate() error {
	switch fm := f.format(); {
	case fm == Text, fm == "json", fm == "yaml", fm == "name", slices.Contains(f.extra, fm):
		return nil
	default:
		_, err := f.templatePrinter()
		return err
	}
}

func (f *Flags) templatePrinter() (printers.ResourcePrinter, error) {
	p, err := f.templates.ToPrinter(f.format())
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		return nil, fmt.Errorf("-o %q: use one of %s", f.Format, strings.Join(f.Formats(), ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("-o %s: %w", f.Format, err)
	}
	return p, nil
}

// Print writes d in the selected format.
func (f *Flags) Print(w io.Writer, d Doc) error {
	switch fm := f.format(); fm {
	case Text:
		return d.Text(w)
	case "name":
		for _, n := range d.Names {
			if _, err := fmt.Fprintln(w, n); err != nil {
				return err
			}
		}
		return nil
	case "json", "yaml":
		data, err := f.encodeJSON(d.Object)
		if err != nil {
			return err
		}
		if fm == "json" {
			var buf bytes.Buffer
			if err := json.Indent(&buf, data, "", "    "); err != nil {
				return fmt.Errorf("encode output: %w", err)
			}
			buf.WriteByte('\n')
			_, err = buf.WriteTo(w)
			return err
		}
		out, err := yaml.JSONToYAML(data)
		if err != nil {
			return fmt.Errorf("encode output: %w", err)
		}
		_, err = w.Write(out)
		return err
	default:
		if render, ok := d.Formats[fm]; ok {
			return render(w)
		}
		if slices.Contains(f.extra, fm) {
			return fmt.Errorf("-o %s: not available here", fm)
		}
		p, err := f.templatePrinter()
		if err != nil {
			return err
		}
		data, err := f.encodeJSON(d.Object)
		if err != nil {
			return err
		}
		return p.PrintObj(rawObject(data), w)
	}
}

// encodeJSON encodes the object, without managedFields unless asked for.
func (f *Flags) encodeJSON(obj any) ([]byte, error) {
	if !f.ShowManagedFields {
		obj = withoutManagedFields(obj)
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode output: %w", err)
	}
	return data, nil
}

func withoutManagedFields(obj any) any {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		c := o.DeepCopy()
		unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
		return c.Object
	case *unstructured.UnstructuredList:
		c := o.DeepCopy()
		items := make([]any, 0, len(c.Items))
		for i := range c.Items {
			unstructured.RemoveNestedField(c.Items[i].Object, "metadata", "managedFields")
			items = append(items, c.Items[i].Object)
		}
		c.Object["items"] = items
		return c.Object
	}
	return obj
}

// List makes a v1 List of objects read from the API server, as kubectl prints several objects.
func List(items ...*unstructured.Unstructured) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}}}
	for _, it := range items {
		if it != nil {
			l.Items = append(l.Items, *it)
		}
	}
	return l
}

// Name is the -o name line of an object read from the API server: "kind.group/name" (the
// group left out for the core group), as kubectl prints it.
func Name(u *unstructured.Unstructured) string {
	gvk := u.GroupVersionKind()
	kind := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		kind += "." + gvk.Group
	}
	return kind + "/" + u.GetName()
}

// rawObject hands already encoded JSON to cli-runtime's template printers, which encode what
// they are given to JSON and walk the result.
type rawObject []byte

func (r rawObject) MarshalJSON() ([]byte, error) { return r, nil }

func (r rawObject) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (r rawObject) DeepCopyObject() runtime.Object { return append(rawObject(nil), r...) }
