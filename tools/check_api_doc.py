#!/usr/bin/env python3
"""Checks that docs/api.md (and docs/c-api.md) name every public name of the public headers.

The names come from clang's AST of include/kvinfer/kvinfer.h (and kvinfer_c.h when present):
every class, struct, enum, enumerator, type alias, free function, constant, public method and
public data member declared in include/kvinfer/. A name counts as covered when it appears in
docs/api.md as a whole word. Exits 1 listing what is missing, 0 when nothing is.

    tools/check_api_doc.py [--clang clang++-14] [--root REPO] [--generated BUILD/include]
"""
import argparse
import json
import os
import re
import subprocess
import sys

KINDS = {"CXXRecordDecl", "EnumDecl", "EnumConstantDecl", "FunctionDecl", "CXXMethodDecl", "FieldDecl",
         "TypeAliasDecl", "TypedefDecl", "VarDecl"}


def ast_objects(clang, root, generated, header, language):
    cmd = [clang, "-fsyntax-only", "-I", os.path.join(root, "include"), "-I", generated, "-Xclang", "-ast-dump=json",
           "-Xclang", "-ast-dump-filter=kvinfer", "-x", language, header]
    cmd[1:1] = ["-std=c++20"] if language == "c++" else ["-std=c11"]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=root).stdout
    decoder, at = json.JSONDecoder(), 0
    while True:
        at = text.find("{", at)
        if at < 0:
            return
        obj, at = decoder.raw_decode(text, at)
        yield obj


def public_names(obj, names, state, private=False):
    # clang writes a location's file only when it changes: follow it in document order.
    for key in ("loc", "range"):
        part = obj.get(key, {})
        for loc in ([part] if key == "loc" else [part.get("begin", {}), part.get("end", {})]):
            for where in (loc, loc.get("spellingLoc", {}), loc.get("expansionLoc", {})):
                if "file" in where:
                    state["file"] = where["file"]
    hidden = private or obj.get("isImplicit", False)
    in_public = "/include/kvinfer/" in "/" + state["file"].replace(os.sep, "/")
    name = obj.get("name", "")
    if (obj.get("kind") in KINDS and not hidden and in_public and name and not name.startswith("operator")
            and not name.startswith("~")):
        names.add(name)
    if obj.get("kind") in ("FunctionDecl", "CXXMethodDecl", "CXXConstructorDecl", "LambdaExpr"):
        hidden = True  # a body's locals are not API (walked only to follow the file)
    # A class's members are private until an access specifier says otherwise; a struct's public.
    access = "private" if obj.get("tagUsed") == "class" else "public"
    for child in obj.get("inner", []):
        if child.get("kind") == "AccessSpecDecl":
            access = child.get("access", access)
            continue
        public_names(child, names, state, hidden or access != "public")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--clang", default="clang++-14")
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--generated", help="the build's include/ (kvinfer/version.h); default ROOT/build/include")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    generated = args.generated or os.path.join(root, "build", "include")
    names = set()
    headers = [("include/kvinfer/kvinfer.h", "c++")]
    if os.path.exists(os.path.join(root, "include/kvinfer/kvinfer_c.h")):
        headers.append(("include/kvinfer/kvinfer_c.h", "c"))
    for header, language in headers:
        for obj in ast_objects(args.clang, root, generated, header, language):
            public_names(obj, names, {"file": ""})
    doc = ""
    for name in ("docs/api.md", "docs/c-api.md"):  # the C API's reference is its own page
        if os.path.exists(os.path.join(root, name)):
            with open(os.path.join(root, name), encoding="utf-8") as f:
                doc += f.read()
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", doc))
    missing = sorted(n for n in names if n not in words)
    print(f"{len(names)} public names in include/kvinfer/, {len(names) - len(missing)} named in docs/api.md or c-api.md")
    if missing:
        print("missing from docs/api.md and docs/c-api.md: " + ", ".join(missing))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
