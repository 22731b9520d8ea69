# bash completion for bloomkit: subcommands, their options, and file names.
#
# The lists come from bloomkit's own help (the COMMANDS section of
# `bloomkit --help`, the --options of `bloomkit help CMD`), read once per
# shell and command, so they follow the installed version.

_bloomkit_commands=
declare -A _bloomkit_options 2>/dev/null

_bloomkit()
{
    local cur prev cmd i
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    if [ -z "$_bloomkit_commands" ]; then
        _bloomkit_commands=$("${COMP_WORDS[0]}" --help 2>/dev/null | awk '
            /^[A-Z][A-Z ]*$/ { in_cmds = ($0 == "COMMANDS"); next }
            in_cmds && /^  [a-z][a-z-]* / && !seen[$1]++ { print $1 }')
    fi
    cmd=
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
            -*) ;;
            *) cmd=${COMP_WORDS[i]}; break ;;
        esac
    done
    if [ -z "$cmd" ]; then
        COMPREPLY=($(compgen -W "$_bloomkit_commands help --help --version" -- "$cur"))
        return
    fi
    case $prev in
        -t|--type)
            COMPREPLY=($(compgen -W "blocked classic counting deletable cuckoo scalable window" -- "$cur"))
            return ;;
        -n|--capacity|-e|--error|--seed|-j|--jobs|-f|--field|-d|--delimiter|--window|--generations|--counter-bits|--regions|--bucket-size|--fingerprint-bits|--max-kicks|--expansion|--nodes|--shards)
            return ;;
    esac
    if [ "$cmd" = help ]; then
        COMPREPLY=($(compgen -W "$_bloomkit_commands" -- "$cur"))
        return
    fi
    if [[ $cur == -* ]]; then
        if [ -z "${_bloomkit_options[$cmd]+set}" ]; then
            _bloomkit_options[$cmd]=$("${COMP_WORDS[0]}" help "$cmd" 2>/dev/null |
                grep -o -- '--[a-z][a-z-]*' | sort -u | tr '\n' ' ')
        fi
        COMPREPLY=($(compgen -W "${_bloomkit_options[$cmd]}" -- "$cur"))
        return
    fi
    COMPREPLY=($(compgen -f -- "$cur"))
}
complete -o filenames -F _bloomkit bloomkit
