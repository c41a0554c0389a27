package imagebuild

import (
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// SBOMDir is where each image keeps its SPDX document, <binary>.spdx.json.
const SBOMDir = "/usr/share/doc/aicr-operator"

// spdx is the subset of an SPDX 2.3 JSON document the images carry.
type spdx struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreation       `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID           string        `json:"SPDXID"`
	Name             string        `json:"name"`
	VersionInfo      string        `json:"versionInfo,omitempty"`
	DownloadLocation string        `json:"downloadLocation"`
	FilesAnalyzed    bool          `json:"filesAnalyzed"`
	LicenseConcluded string        `json:"licenseConcluded"`
	LicenseDeclared  string        `json:"licenseDeclared"`
	CopyrightText    string        `json:"copyrightText"`
	Comment          string        `json:"comment,omitempty"`
	ExternalRefs     []spdxExtRef  `json:"externalRefs,omitempty"`
	Checksums        []spdxSumPair `json:"checksums,omitempty"`
}

type spdxExtRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxSumPair struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

var spdxIDUnsafe = regexp.MustCompile(`[^a-zA-Z0-9.-]+`)

func spdxID(kind, name string) string {
	return "SPDXRef-" + kind + "-" + spdxIDUnsafe.ReplaceAllString(name, "-")
}

// sbomInput is what an image's SBOM describes.
type sbomInput struct {
	Binary, Version, Revision, Source, Platform string
	Created                                     time.Time
	BinarySHA256                                string
	Build                                       *buildinfo.BuildInfo
	CA                                          *CACertificates
}

// SBOM is the SPDX 2.3 JSON document of one image: the binary's main module, every module its
// Go build information lists (what go version -m prints), the Go standard library, and Debian's
// ca-certificates package of the base.
func SBOM(in sbomInput) ([]byte, error) {
	bi := in.Build
	mainID := spdxID("Package", bi.Path)
	doc := spdx{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              fmt.Sprintf("aicr-operator-%s-%s-%s", in.Binary, in.Version, strings.ReplaceAll(in.Platform, "/", "-")),
		DocumentNamespace: fmt.Sprintf("%s/sbom/%s/%s/%s", strings.TrimSuffix(in.Source, "/"), in.Binary, in.Revision, in.Platform),
		CreationInfo:      spdxCreation{Created: in.Created.UTC().Format(time.RFC3339), Creators: []string{"Tool: aicr-operator-imagebuild", "Organization: aicr-operator"}},
	}
	noAssert := "NOASSERTION"
	doc.Packages = append(doc.Packages, spdxPackage{
		SPDXID: mainID, Name: bi.Path, VersionInfo: in.Version, DownloadLocation: in.Source,
		LicenseConcluded: "Apache-2.0", LicenseDeclared: "Apache-2.0", CopyrightText: noAssert,
		Comment:      fmt.Sprintf("%s at revision %s, %s (%s)", bi.Path, in.Revision, in.Platform, bi.GoVersion),
		ExternalRefs: []spdxExtRef{{"PACKAGE-MANAGER", "purl", fmt.Sprintf("pkg:golang/%s@%s", bi.Main.Path, in.Version)}},
		Checksums:    []spdxSumPair{{"SHA256", in.BinarySHA256}},
	})
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", mainID})
	stdID := spdxID("Package", "stdlib")
	doc.Packages = append(doc.Packages, spdxPackage{
		SPDXID: stdID, Name: "stdlib", VersionInfo: bi.GoVersion, DownloadLocation: "https://go.dev/dl/",
		LicenseConcluded: noAssert, LicenseDeclared: "BSD-3-Clause", CopyrightText: noAssert,
		ExternalRefs: []spdxExtRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/stdlib@" + bi.GoVersion}},
	})
	doc.Relationships = append(doc.Relationships, spdxRelationship{mainID, "DEPENDS_ON", stdID})
	for _, d := range bi.Deps {
		m := d
		comment := ""
		if d.Replace != nil {
			comment = fmt.Sprintf("%s %s replaced by %s %s", d.Path, d.Version, d.Replace.Path, d.Replace.Version)
			m = d.Replace
		}
		version := m.Version
		if version == "" || version == "(devel)" {
			// a module of this repository (the workspace's replace of ../shared and the like)
			version = in.Version
		}
		id := spdxID("Package", d.Path)
		p := spdxPackage{
			SPDXID: id, Name: d.Path, VersionInfo: version, DownloadLocation: noAssert,
			LicenseConcluded: noAssert, LicenseDeclared: noAssert, CopyrightText: noAssert, Comment: comment,
			ExternalRefs: []spdxExtRef{{"PACKAGE-MANAGER", "purl", fmt.Sprintf("pkg:golang/%s@%s", d.Path, version)}},
		}
		if m.Sum != "" {
			p.Comment = strings.TrimSpace(p.Comment + " go.sum " + m.Sum)
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{mainID, "DEPENDS_ON", id})
	}
	caID := spdxID("Package", "deb-ca-certificates")
	doc.Packages = append(doc.Packages, spdxPackage{
		SPDXID: caID, Name: "ca-certificates", VersionInfo: in.CA.Version, DownloadLocation: "https://packages.debian.org/ca-certificates",
		LicenseConcluded: noAssert, LicenseDeclared: "GPL-2.0-or-later AND MPL-2.0", CopyrightText: noAssert,
		Comment:      fmt.Sprintf("%d certificates in %s", in.CA.Count, CABundle),
		ExternalRefs: []spdxExtRef{{"PACKAGE-MANAGER", "purl", "pkg:deb/debian/ca-certificates@" + in.CA.Version + "?arch=all"}},
	})
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", caID})
	return json.MarshalIndent(doc, "", "  ")
}
