#!/bin/bash
# Fixture: Normal-OJ/Normal-OJ's deploy.sh at 5207736, the site's routine
# deploy: build and start with explicit -f files, stop with the default set.
docker-compose -f docker-compose.yml -f docker-compose.prod.yml build --no-cache
docker-compose down
docker-compose -f docker-compose.yml -f docker-compose.prod.yml up -d
