# other_tiers SIDE: the hook tiers the tracer listed as available for SIDE (tcp or dns) in its first
# stats record (saved in /tmp/km-caps), but the one it chose by default; one per line.
other_tiers() {
  line=$(grep -o "\"$1\":{\"tier\":\"[a-z-]*\",\"available\":\[[^]]*\]" /tmp/km-caps | head -n 1)
  chosen=$(echo "$line" | sed 's/.*"tier":"\([a-z-]*\)".*/\1/')
  echo "$line" | sed 's/.*"available":\[\(.*\)\]/\1/' | tr -d '"' | tr ',' '\n' | grep -vx "$chosen"
}
