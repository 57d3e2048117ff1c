# other_tiers SIDE: the hook tiers the tracer listed as available for SIDE (tcp or dns) in its first
# stats record (saved in /tmp/km-caps), but the one it chose by default and those KM_ALREADY_RUN
# names (`tcp:tracepoint ...`: the host's, whose integration tests ran them in the same run); one
# per line. A tier left out that way is said on stderr (`KM-ON-HOST tcp tracepoint`) for the report.
other_tiers() {
  line=$(grep -o "\"$1\":{\"tier\":\"[a-z-]*\",\"available\":\[[^]]*\]" /tmp/km-caps | head -n 1)
  chosen=$(echo "$line" | sed 's/.*"tier":"\([a-z-]*\)".*/\1/')
  for tier in $(echo "$line" | sed 's/.*"available":\[\(.*\)\]/\1/' | tr -d '"' | tr ',' ' '); do
    case " $KM_ALREADY_RUN " in *" $1:$tier "*) echo "KM-ON-HOST $1 $tier" >&2; continue ;; esac
    [ "$tier" = "$chosen" ] || echo "$tier"
  done
}
