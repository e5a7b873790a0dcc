curl -s http://127.0.0.1:$PORT/api/v1/health; echo
API=http://127.0.0.1:$PORT/api/v1
login() {  # prints a token for admin with password $1
    curl -s -H 'Content-Type: application/json' -d "{\"username\":\"admin\",\"password\":\"$1\"}" \
         "$API/auth/login" | sed 's/.*"access_token":"\([^"]*\)".*/\1/'
}
PW=$(sed -n 's/^SVC_ADMIN_PASSWORD=//p' .svc/env)
NEW='choose-a-passphrase-of-12-or-more'
curl -s -H "Authorization: Bearer $(login "$PW")" -H 'Content-Type: application/json' \
     -d "{\"old_password\":\"$PW\",\"new_password\":\"$NEW\"}" "$API/auth/change-password"; echo
TOKEN=$(login "$NEW")
curl -s -H "Authorization: Bearer $TOKEN" "$API/logs?limit=5"; echo
