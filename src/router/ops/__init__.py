"""Operations around the query path: publishing, activation, the query log and cache warming."""
