# Sourced by packaging/make-tarball.sh and ci/gpu-bundle.sh: make an installed tree
# self-contained by copying in every shared library its executables and plugins
# need, except glibc's own (they must pair with the host's ld.so).

is_glibc() {
    case $1 in
        linux-vdso.so.* | ld-linux-x86-64.so.* | libc.so.* | libm.so.* | libmvec.so.* | \
            libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.* | libutil.so.*) return 0 ;;
    esac
    return 1
}

# bundle_shared_libraries TREE: copies non-glibc dependencies of TREE/bin and
# TREE/lib into TREE/lib; fails naming the file when a dependency is missing.
bundle_shared_libraries() {
    local tree=$1 elf soname arrow path rest
    local -a elves
    mapfile -t elves < <(find "$tree/bin" "$tree/lib" -type f \( -perm -u+x -o -name '*.so*' \))
    for elf in "${elves[@]}"; do
        # ldd lists the whole closure, so one pass over our own files suffices.
        while read -r soname arrow path rest; do
            [[ $arrow == "=>" ]] || continue
            is_glibc "$soname" && continue
            if [[ $path == "not" ]]; then
                echo "bundle: $elf needs $soname, which is not installed" >&2
                return 1
            fi
            [[ -e $tree/lib/$soname ]] || cp -L "$path" "$tree/lib/$soname"
        done < <(ldd "$elf")
    done
    chmod 0644 "$tree"/lib/*.so*
}
