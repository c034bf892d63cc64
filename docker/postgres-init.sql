-- Run once by the postgres image on an empty data volume (docker-compose.yaml): the operations
-- ledger's own database beside Airflow's. streamops migrates its tables on first use (Alembic).
CREATE DATABASE streamops OWNER airflow;
